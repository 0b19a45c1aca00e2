"""The README's single-machine recipe ("Run on a cluster", "A single machine"), executed
from the README's own text in a fresh copy of the repository, so the README cannot drift
from what works.

Each line runs in bash, after the lines that set up the shell (`. .venv/bin/activate`,
`export ...`), as in the user's one shell. The test's PATH does not hold the venv: only the
recipe's activation puts it there. What the test substitutes, and why:
- ports (5000, 8265, Ray's GCS and agent ports) -> free ones, and `--temp-dir`: other Ray
  clusters and servers run on this machine;
- `.venv/bin/activate` -> the venv running the tests (the repository's `.venv` under
  `make test`); RAY_AUTH_TOKEN_PATH -> a token of the test's own, so
  `ray get-auth-token --generate` leaves ~/.ray alone; ECHORAY_HOME -> a temporary folder;
- the job gets `--set source.limit=512 --set train.max_epochs=2 --set train.target=null`
  appended (a short run), and is resubmitted while Ray answers "No available agent" (the
  head's job agent registers a few seconds after `ray start` returns);
- `ray stop` kills every Ray on the machine (other tests', other users'): the test stops
  the processes of the session its `ray start` ran in instead (Ray's processes stay in it;
  its workers have process groups of their own), and `kill %1` stops the `mlflow server`
  it started (its own session too).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
from fake_cluster import stop_pids
from mlflow.tracking import MlflowClient

from helpers import REPO, free_port

BIN = Path(sys.executable).parent
SHORT_RUN = " --set source.limit=512 --set train.max_epochs=2 --set train.target=null"


def recipe_steps(readme: str) -> list[str]:
    """The commands of the fenced block after "**A single machine.**": continuation lines
    joined, trailing comments dropped."""
    section = readme.split("**A single machine.**", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    steps, pending = [], ""
    for raw in block.splitlines():
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1].rstrip() + " "
            continue
        pending = ""
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        if line:
            steps.append(line)
    return steps


def test_recipe_steps_are_what_this_test_knows():
    steps = recipe_steps((REPO / "README.md").read_text())
    assert steps == [
        ". .venv/bin/activate",
        "export RAY_AUTH_MODE=token",
        "ray get-auth-token --generate >/dev/null",
        "mlflow server --host 127.0.0.1 --port 5000 --backend-store-uri sqlite:///$PWD/mlflow.db --workers 1 &",
        "MLFLOW_TRACKING_URI=http://127.0.0.1:5000 ray start --head --dashboard-host=127.0.0.1",
        "ray job submit --address http://127.0.0.1:8265 --working-dir . --runtime-env jobs/runtime_env.yaml "
        "-- python jobs/train.py pipelines/digits.yaml",
        "ray stop",
        "kill %1",
    ]


def fresh_copy(dest: Path) -> Path:
    """The repository's tracked and not-ignored files, as a fresh clone has them."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.splitlines()
    for name in files:
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    return dest


def base_env(home: Path, token: Path) -> dict:
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != BIN]
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI", "VIRTUAL_ENV")}
    env.update(PATH=os.pathsep.join(path), RAY_AUTH_TOKEN_PATH=str(token), ECHORAY_HOME=str(home))
    return env


def wait_health(url: str, proc: subprocess.Popen, timeout_s: float = 300) -> None:
    deadline = time.time() + timeout_s  # 51 s seen for `mlflow server` at load 20
    while time.time() < deadline:
        assert proc.poll() is None, f"the process for {url} exited with {proc.returncode}"
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer in {timeout_s} s")


def stop_session(sid: int) -> None:
    """Stop every process of the session (Ray's workers have process groups of their own,
    in the session `ray start` ran in) as fake_cluster.stop_pids does; only ours."""
    def members() -> set[int]:
        return {p.pid for p in psutil.process_iter() if _sid(p) == sid}

    deadline = time.monotonic() + 60  # a process the session starts while it stops is stopped in turn
    while (left := members()) and time.monotonic() < deadline:
        stop_pids(left)
    assert not members()


def _sid(p: psutil.Process) -> int | None:
    try:
        return os.getsid(p.pid)
    except (ProcessLookupError, PermissionError):
        return None


def test_single_machine_recipe_as_written(tmp_path):
    repo = fresh_copy(tmp_path / "clone")
    home = tmp_path / "echoray_home"
    token = tmp_path / "auth_token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    env = base_env(home, token)
    mlflow_port, dash, gcs = free_port(), free_port(), free_port()
    ray_tmp = Path(f"/tmp/rr{os.getpid()}")  # short: Ray's socket paths must fit 107 characters
    agents = " ".join(f"--{name}-port={free_port()}" for name in (
        "dashboard-agent-listen", "dashboard-agent-grpc", "metrics-export", "runtime-env-agent", "ray-client-server"))
    prelude: list[str] = []
    sessions: dict[str, int] = {}
    procs: list[subprocess.Popen] = []
    log = open(tmp_path / "recipe.log", "w")

    def bash(cmd: str, **kw) -> subprocess.Popen:
        proc = subprocess.Popen(["bash", "-c", "; ".join([*prelude, cmd])], cwd=repo, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, **kw)
        procs.append(proc)
        return proc

    job_out = ""
    try:
        for step in recipe_steps((REPO / "README.md").read_text()):
            started = time.time()
            if step.startswith(". .venv/bin/activate"):
                prelude.append(f". {shlex.quote(str(BIN / 'activate'))}")
            elif step.startswith("export "):
                prelude.append(step)
            elif step.startswith("ray get-auth-token"):
                assert bash(step).wait(120) == 0
            elif step.startswith("mlflow server"):
                server = bash(step.replace("--port 5000", f"--port {mlflow_port}").removesuffix("&").strip())
                sessions["mlflow"] = server.pid
                wait_health(f"http://127.0.0.1:{mlflow_port}/health", server)
            elif " ray start --head" in step:
                cmd = (step.replace(":5000", f":{mlflow_port}") + f" --port={gcs} --dashboard-port={dash} {agents}"
                       f" --temp-dir={ray_tmp} --disable-usage-stats")
                starter = bash(cmd)
                sessions["ray"] = starter.pid
                assert starter.wait(300) == 0, (tmp_path / "recipe.log").read_text()[-3000:]
            elif step.startswith("ray job submit"):
                cmd = step.replace(":8265", f":{dash}") + SHORT_RUN
                for _ in range(30):
                    res = subprocess.run(["bash", "-c", "; ".join([*prelude, cmd])], cwd=repo, env=env,
                                         capture_output=True, text=True, timeout=900)
                    job_out = res.stdout + res.stderr
                    if "No available agent to submit job" not in job_out:
                        break
                    time.sleep(2)
                assert res.returncode == 0, job_out[-5000:]
            elif step == "ray stop":
                stop_session(sessions.pop("ray"))
            elif step == "kill %1":
                stop_session(sessions.pop("mlflow"))
            else:
                raise AssertionError(f"README step not known to this test: {step}")
            print(f"{time.time() - started:6.1f} s  {step}")
    finally:
        for sid in sessions.values():
            stop_session(sid)
        log.close()
        shutil.rmtree(ray_tmp, ignore_errors=True)

    assert "No module named" not in job_out
    assert "eval   2  epoch" in job_out and "succeeded" in job_out.lower()
    # The run folder is where the closing lines say, outside Ray's working dir, and the run
    # is in the recipe's MLflow server (read from its sqlite store, the server is gone).
    (run_dir,) = (home / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert f"run folder: {run_dir.resolve()} on " in job_out
    assert f"MLflow UI: http://127.0.0.1:{mlflow_port}/#/experiments/{summary['mlflow_experiment_id']}" \
           f"/runs/{summary['mlflow_run_id']}" in job_out
    assert "mlflow ui --backend-store-uri" not in job_out
    assert summary["fresh_examples"] == summary["trained_examples"] == 2 * (512 // 64) * 64
    client = MlflowClient(f"sqlite:///{repo / 'mlflow.db'}")
    run = client.get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    # Uploaded through the server, to its default artifact root next to the store.
    exp, run_id = summary["mlflow_experiment_id"], summary["mlflow_run_id"]
    assert summary["mlflow_artifact_uri"] == f"mlflow-artifacts:/{exp}/{run_id}/artifacts"
    uploaded = repo / "mlartifacts" / exp / run_id / "artifacts"
    assert json.loads((uploaded / "summary.json").read_text()) == summary
    assert (uploaded / "config.yaml").read_text() == (run_dir / "config.yaml").read_text()
