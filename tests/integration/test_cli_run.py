"""The newcomer's contract through the real console script: `echoray train` with the
embedded default reaches the digits target and prints only echoray's lines (the libraries'
go to RUN_DIR/console.log); a plan that cannot fit exits 2."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import ray
from mlflow.tracking import MlflowClient


def echoray_bin() -> str:
    exe = Path(sys.executable).parent / "echoray"
    return str(exe) if exe.exists() else shutil.which("echoray")


def test_default_pipeline_reaches_target_through_the_cli(tmp_path):
    out = subprocess.run([echoray_bin(), "train", "--out", "run"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["target_reached"] is True and summary["metric"]["value"] >= 0.97
    assert summary["pipeline"] == "embedded:digits"
    assert "eval   1  epoch" in out.stdout and "mlflow ui --backend-store-uri" in out.stdout
    # A quiet console: echoray's lines only; Ray's, MLflow's and Ray Data's go to the run's log.
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    assert lines and all(ln.startswith("[echoray] ") for ln in lines), "\n".join(
        ln for ln in lines if not ln.startswith("[echoray] "))
    log = tmp_path / "run" / "console.log"
    assert f"[echoray] Ray's and MLflow's messages: {Path('run') / 'console.log'}" in out.stdout
    assert "Creating initial MLflow database tables" in log.read_text()
    assert summary["mlflow_tracking_uri"] == f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = MlflowClient(summary["mlflow_tracking_uri"]).get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.data.params["name"] == "digits"


def test_plan_that_cannot_fit_this_machine_exits_2_naming_the_shortfall(tmp_path):
    out = subprocess.run([echoray_bin(), "train", "--set", "scaling.num_workers=3"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    assert "CPU: needs 3.5, cluster has 2" in out.stderr and "scaling.num_workers" in out.stderr
    assert not (tmp_path / "runs").exists()
    runs = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").search_runs(
        [e.experiment_id for e in MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").search_experiments()])
    assert runs == []


def test_bench_input_prints_echoray_lines_only_and_names_its_log(local_ray, tmp_path):
    out = subprocess.run([echoray_bin(), "bench-input", "--seconds", "2"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    # echoray's lines and its JSON result; on stdout also the lines Ray forwards from its
    # processes (a "(raylet)" warning as the actors are killed at the end: log_to_driver, which
    # the quiet console does not divert). Everything else went to the log.
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    ours = ("[echoray] ", "echoray: ", '{"examples_per_s"')
    forwarded = [ln for ln in out.stdout.splitlines() if re.match(r"(\x1b\[\d+m)?\((raylet|pid=|\w+ pid=)", ln)]
    assert all(ln.startswith(ours) for ln in lines if ln not in forwarded), "\n".join(
        ln for ln in lines if not ln.startswith(ours) and ln not in forwarded)
    first = lines[0]
    assert first.startswith("[echoray] Ray's and MLflow's messages: ") and first.endswith("(--verbose prints them here)")
    log = Path(first.removeprefix("[echoray] Ray's and MLflow's messages: ").split(" (")[0])
    assert any("input pipeline:" in ln for ln in lines)
    # what the libraries said went to the log, named again at the end; an empty log is removed
    if log.exists():
        assert log.stat().st_size > 0 and f"echoray: Ray's and MLflow's messages of this run: {log}" in out.stderr
    else:
        assert "messages of this run" not in out.stderr
    # --verbose on the tests' local Ray (as a `ray job submit` driver attaches; no Ray start of
    # its own, whose quiet console the run above proved): the libraries' lines stay here.
    verbose = subprocess.run([echoray_bin(), "bench-input", "--seconds", "2", "--verbose"], cwd=tmp_path,
                             env={**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address},
                             capture_output=True, text=True, timeout=600)
    assert verbose.returncode == 0 and "Ray's and MLflow's messages" not in verbose.stdout
