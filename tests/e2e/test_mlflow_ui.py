"""The MLflow UI of a finished run, in a real headless Chromium (Debian's `chromium`; .ci/run
installs it): the link echoray prints opens the run in the Model training view with its
metrics listed, its datasets and its logged model, and a screenshot is saved next to the
test output (and copied to $ECHORAY_UI_SCREENSHOT when set: docs/screenshots/mlflow_run_page.png).

Driven by Chromium's own `--dump-dom` and `--screenshot` flags (one browser start, no
driver or client library to keep in step with the browser's version). The UI is a React
single-page app: `--virtual-time-budget` lets the page run its timers and finish its
requests (virtual time stops while a request is pending) before the DOM is dumped.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

from mlflow.tracking import MlflowClient

from helpers import REPO

BIN = Path(sys.executable).parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1400,2400"]


class _Text(HTMLParser):
    """The page's text, one string per text node (scripts and styles left out)."""

    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self._skip -= tag in ("script", "style") and self._skip > 0

    def handle_data(self, data):
        if not self._skip and data.strip():
            self.parts.append(data.strip())


def open_page(url: str, screenshot: Path, budget_ms: int = 30000) -> list[str]:
    """Load `url` in a fresh headless Chromium; returns the page's text nodes."""
    with tempfile.TemporaryDirectory(prefix="chr") as profile:
        res = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
                              f"--screenshot={screenshot}", "--dump-dom", url],
                             capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    parser = _Text()
    parser.feed(res.stdout)
    return parser.parts


def test_finished_run_opens_in_the_model_training_view(ray_head, mlflow_server, tmp_path):
    # Fails, never skips, without a browser: a skipped UI check would let `make test` pass
    # with the UI unchecked. .ci/run installs chromium (and fails when it cannot); locally,
    # run .ci/install-debian-packages.
    assert CHROMIUM is not None, "needs Debian's chromium: run .ci/install-debian-packages"
    res = subprocess.run(
        [str(BIN / "echoray"), "train", str(REPO / "pipelines" / "digits.yaml"), "--set", f"tracking.uri={mlflow_server}",
         "--set", "tracking.experiment=ui", "--set", "source.limit=512", "--set", "train.max_epochs=2",
         "--set", "train.target=null", "--set", "echo.stage=after_augment", "--set", "echo.factor=2",
         # trained in the driver's process: what the page shows is the same, and the run
         # starts ~10 s sooner than with a Ray Train worker group
         "--set", "scaling.local_mode=true", "--out", str(tmp_path / "digits-ui-e2e")],
        env={**ray_head["env"], "RAY_ADDRESS": ray_head["gcs"]}, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-6000:]
    (url,) = re.findall(r"MLflow UI: (\S+)", res.stdout)
    client = MlflowClient(mlflow_server)
    run = client.search_runs([client.get_experiment_by_name("ui").experiment_id])[0]
    assert url == f"{mlflow_server}/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id}" \
                  "?workflowType=machine_learning"
    metrics = set(run.data.metrics)
    assert metrics >= {"accuracy", "loss", "lr", "fresh_examples", "trained_examples"}

    shot = tmp_path / "mlflow_run_page.png"
    text = open_page(url, shot)
    print(f"screenshot: {shot}")
    if os.environ.get("ECHORAY_UI_SCREENSHOT"):  # where the docs' copy is refreshed from
        shutil.copyfile(shot, os.environ["ECHORAY_UI_SCREENSHOT"])
    assert shot.stat().st_size > 10_000
    assert run.info.run_name == "digits-ui-e2e" and run.info.run_name in text
    missing = sorted(m for m in metrics if m not in text)
    assert not missing, f"metrics not on the page: {missing}"
    # Model training view: its sidebar (Runs, Models, Model registry), not GenAI's.
    assert {"Runs", "Model registry"} <= set(text)
    assert not {"Evaluation runs", "Evaluations", "Judges"} & set(text)
    # The datasets it trained and was scored on (name and digest; its context, the other one
    # behind "+1") and the model it logged (echoray/tracking_datasets.py, tracking_model.py).
    inputs = {i.tags[0].value: i.dataset for i in run.inputs.dataset_inputs}
    assert set(inputs) == {"training", "evaluation"}
    assert f"digits ({inputs['training'].digest})" in text and "training" in text
    (logged,) = run.outputs.model_outputs
    made = client.get_logged_model(logged.model_id)
    assert made.experiment_id == run.info.experiment_id
    assert made.tags["echoray.epoch"] == "2.0"  # the weights the run ended with (passes of fresh data)
    assert "Logged models (1)" in text and "model" in text
