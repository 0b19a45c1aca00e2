"""The README's five-minute tour, then docs/getting-started.md's tour and its Python API
example, in that order, in one fresh copy of the repository and one shell, as a newcomer
reads them: each command is taken from the page's own text, so a page cannot ask for
something that fails (such as a search into a folder an earlier command already filled).

What the test changes, and why (the commands themselves run as written):
- the copy's pipelines/digits.yaml and digits_search.yaml, and every `echoray` command,
  get a tiny budget (source.limit 256, one epoch, no target; `--set` appended to the
  commands; a search of the tours `--trials 2 --repeats 1`, the Python API example's
  `trials=4, repeats=2` written `trials=2, repeats=1`), so the whole walk takes minutes;
- a command the walk already ran, word for word, in the same folder (getting started
  repeats three of the README tour's runs and its `mlflow ui`) is not run a second time:
  it would only add a run folder of the same kind;
- `mlflow ui` gets `--port` of a free port (other servers run on this machine), is
  waited on until it answers and then stopped; it runs with MLFLOW_WORKERS=1 and
  MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false (one server process instead of four, and no
  runner of MLflow's server-side jobs, which a run's pages do not use: the same app
  answers, in 5 s instead of 11 here);
- `.venv/bin/activate` is the venv running the tests (as in test_readme_recipe.py).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from pathlib import Path

import yaml
from test_readme_recipe import BIN, fresh_copy, stop_session, wait_health

from echoray.config_load import parse_yaml
from helpers import REPO, free_port

SHORT = {"source": {"limit": 256}, "train": {"max_epochs": 1, "target": None}}
SHORT_SET = " --set source.limit=256 --set train.max_epochs=1 --set train.target=null"
SHORT_SEARCH = " --trials 2 --repeats 1"  # argparse: the last --trials/--repeats wins
UI_ENV = "export MLFLOW_WORKERS=1 MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false;"
API_SEARCH, SHORT_API_SEARCH = "trials=4, repeats=2", "trials=2, repeats=1"


def _commands(block: str) -> list[str]:
    lines = [re.sub(r"\s+#\s.*$", "", raw).strip() for raw in block.splitlines()]
    return [line for line in lines if line]


def readme_tour(readme: str) -> list[str]:
    section = readme.split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
    return _commands(re.search(r"```\n(.*?)```", section, re.S).group(1))


def getting_started(page: str) -> tuple[list[str], str]:
    """(the tour's commands, the Python API example)."""
    tour = page.split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
    api = page.split("## The Python API", 1)[1]
    commands = [c for block in re.findall(r"```\n(.*?)```", tour, re.S) for c in _commands(block)]
    return commands, re.search(r"```python\n(.*?)```", api, re.S).group(1)


def test_the_walk_is_what_this_test_knows():
    tour = readme_tour((REPO / "README.md").read_text())
    commands, python = getting_started((REPO / "docs" / "getting-started.md").read_text())
    for cmd in tour + commands:
        bare = re.sub(r"^(\w+=\S+\s+)+", "", cmd)  # an environment prefix (PYTHONPATH=... for the slow store)
        assert bare.startswith(("echoray train", "echoray tune", "mlflow ui")), cmd
    assert sum(c.startswith("echoray tune") for c in tour + commands) == 2
    assert ".train(" in python and ".tune(" in python and python.count(API_SEARCH) == 1


def _shorten(pipeline: Path) -> None:
    tree = parse_yaml(pipeline.read_text())  # YAML 1.2, as echoray reads it: `on:` stays a key
    for section, keys in SHORT.items():
        tree.setdefault(section, {}).update(keys)
    pipeline.write_text(yaml.safe_dump(tree, sort_keys=False))


def test_readme_tour_then_getting_started_as_written(tmp_path):
    repo = fresh_copy(tmp_path / "clone")
    for name in ("digits.yaml", "digits_search.yaml"):
        _shorten(repo / "pipelines" / name)
    tour = readme_tour((REPO / "README.md").read_text())
    commands, python = getting_started((REPO / "docs" / "getting-started.md").read_text())
    activate = f". {shlex.quote(str(BIN / 'activate'))}"
    log = tmp_path / "walk.log"
    timings = []
    walk = list(dict.fromkeys(tour + commands))  # each distinct command once, in reading order
    assert len(walk) == len(tour) + len(commands) - 4
    with open(log, "w") as out:
        for cmd in walk:
            started = time.time()
            if cmd.startswith("mlflow ui"):
                port = free_port()
                ui = subprocess.Popen(["bash", "-c", f"{activate}; {UI_ENV} exec {cmd} --port {port}"], cwd=repo,
                                      stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
                try:
                    wait_health(f"http://127.0.0.1:{port}/health", ui)
                finally:
                    stop_session(ui.pid)
            else:
                budget = SHORT_SET + (SHORT_SEARCH if cmd.startswith("echoray tune") else "")
                res = subprocess.run(["bash", "-c", f"{activate}; {cmd}{budget}"], cwd=repo, stdout=out,
                                     stderr=subprocess.STDOUT, timeout=900)
                assert res.returncode == 0, f"{cmd}\n" + log.read_text()[-4000:]
            timings.append(f"{time.time() - started:6.1f} s  {cmd}")
        (repo / "example.py").write_text(python.replace(API_SEARCH, SHORT_API_SEARCH))
        started = time.time()
        res = subprocess.run(["bash", "-c", f"{activate}; python example.py"], cwd=repo, stdout=out,
                             stderr=subprocess.STDOUT, timeout=900)
        timings.append(f"{time.time() - started:6.1f} s  the Python API example")
    print("\n".join(timings))
    assert res.returncode == 0, log.read_text()[-4000:]
    # Every run went where the pages say: three finished searches in their own folders,
    # and the runs of the README tour and the example (4 + 1) under runs/.
    finished = {d.name: json.loads((d / "summary.json").read_text()) for d in (repo / "runs").iterdir()
                if (d / "summary.json").exists()}
    assert sorted(n for n in finished if "search" in n) == ["api-search", "first-search", "search"]
    trains = {n: s for n, s in finished.items() if n.startswith("digits-")}
    assert len(trains) == 5 and len(finished) == 8, sorted(finished)
    for name, points in (("search", (2, 1)), ("first-search", (2, 1)), ("api-search", (2, 1))):
        state = json.loads((repo / "runs" / name / "search.json").read_text())
        assert (state["trials"], state["repeats"]) == points, name
    assert all(s["fresh_examples"] == 256 for s in trains.values())
