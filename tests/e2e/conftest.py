"""Real services on loopback: `ray start --head` and `mlflow server`, started and
stopped by the tests (only the processes they started)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from fake_cluster import stop_process_group

from helpers import free_port
from s3_server import without_aws

BIN = Path(sys.executable).parent


_TOKEN_DIR = Path(tempfile.mkdtemp(prefix="raytok"))
_TOKEN = _TOKEN_DIR / "auth_token"
_TOKEN.write_text(secrets.token_hex(32))
_TOKEN.chmod(0o600)


def _env() -> dict:
    """Token authentication on, with a token of the tests' own (not ~/.ray/auth_token). No
    AWS settings (the tests' S3 server puts them in this process's environment): a job gets
    them only through its runtime env, as on a cluster whose nodes have none."""
    env = without_aws(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("RAY_ADDRESS", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    env["RAY_AUTH_MODE"] = "token"
    env["RAY_AUTH_TOKEN_PATH"] = str(_TOKEN)
    return env


def _wait_http(url: str, timeout_s: float, proc: subprocess.Popen) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process for {url} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except urllib.error.HTTPError as exc:
            if exc.code == 401:  # Ray's token authentication answered: the server is up
                return
            time.sleep(0.5)
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"{url} did not come up in {timeout_s} s")




@pytest.fixture(scope="session")
def ray_head():
    """A Ray head on 127.0.0.1 with 2 CPUs and the dashboard (job server) on loopback."""
    tmp = Path(tempfile.mkdtemp(prefix="rayh", dir="/tmp"))
    gcs, dash = free_port(), free_port()
    # Free ports for the agents too: with Ray's fixed defaults (52365, 10001, ...) a second
    # cluster on this machine gets no job agent ("No available agent to submit job").
    agents = [f"--{name}-port={free_port()}" for name in (
        "dashboard-agent-listen", "dashboard-agent-grpc", "metrics-export", "runtime-env-agent", "ray-client-server")]
    cmd = [str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
           f"--port={gcs}", "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}", *agents, "--num-cpus=2",
           "--num-gpus=0", f"--temp-dir={tmp}", "--disable-usage-stats", "--include-dashboard=true"]
    log = open(tmp / "head.log", "w")
    proc = subprocess.Popen(cmd, env=_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_http(f"http://127.0.0.1:{dash}/api/version", 300, proc)
        yield {"gcs": f"127.0.0.1:{gcs}", "dashboard": f"http://127.0.0.1:{dash}", "env": _env(),
               "token": _TOKEN.read_text()}
    finally:
        # After the session's jobs the leader did not exit within 30 s of its SIGTERM
        # (measured: 33.7 s of teardown after test_tune_job.py, against ~5 s for an idle
        # head); the tests are done with it (fake_cluster.GRACE_S).
        stop_process_group(proc)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def mlflow_server():
    """`mlflow server` on loopback with its own sqlite store and served artifacts."""
    tmp = Path(tempfile.mkdtemp(prefix="mlf", dir="/tmp"))
    port = free_port()
    cmd = [str(BIN / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port),
           "--backend-store-uri", f"sqlite:///{tmp / 'mlflow.db'}",
           "--artifacts-destination", str(tmp / "artifacts"), "--workers", "1"]
    log = open(tmp / "server.log", "w")
    # No runner of MLflow's server-side jobs (on by default: a consumer process beside the
    # server), which echoray's runs and the UI's run pages do not use.
    env = {**_env(), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_http(f"http://127.0.0.1:{port}/health", 300, proc)  # 51 s seen at load 20
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process_group(proc)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
