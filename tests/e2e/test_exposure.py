"""What a head started as cluster.yaml starts it listens on, and that Ray's token refuses a
client without it at every entrypoint the README shows (issue 28).

cluster.yaml's "Security" comment promises: the dashboard (and the job server, the same
HTTP server) on the head's 127.0.0.1, reached through `ray dashboard`'s SSH tunnel; the
MLflow server on the head's private IP; Ray's own ports (the GCS, the object manager, the
raylet, the agents, Prometheus metrics) on every interface or the node's IP, kept inside the
cluster by the security group, the GCS and the HTTP APIs refusing a client without the token. This test starts a head with the flags of
cluster.yaml's head_start_ray_commands (read from the file; free ports instead of
6379 / 8076 / 8265 / 5000, a temp dir of its own, agents on free ports as tests/e2e/
conftest.py explains) and the MLflow server on the address `hostname -I` gives first, as
those commands compute it, then lists every listening TCP socket of their processes.

Entrypoints (README, docs/how-to/cluster.md): `ray job submit / logs / status / stop / list`
(the job REST API on the dashboard port), the dashboard's pages and state API, and
`ray status` (the GCS). The MLflow server has no authentication of its own: its address
is what keeps it inside the cluster.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
import yaml
from fake_cluster import stop_cluster, stop_process_group

from helpers import REPO, free_port
from s3_server import without_aws

BIN = Path(sys.executable).parent
ALL_INTERFACES = ("0.0.0.0", "::")
AGENTS = ("dashboard-agent-listen", "dashboard-agent-grpc", "metrics-export", "runtime-env-agent",
          "ray-client-server")


def head_commands() -> tuple[str, str]:
    """cluster.yaml's `ray start --head` and `mlflow server` commands, as written."""
    cmds = yaml.safe_load((REPO / "cluster.yaml").read_text())["head_start_ray_commands"]
    return next(c for c in cmds if "ray start --head" in c), next(c for c in cmds if "mlflow server" in c)


def flag(cmd: str, name: str) -> str:
    found = re.search(rf"{name}[= ](\S+)", cmd)
    assert found, f"cluster.yaml's command has no {name}: {cmd}"
    return found.group(1)


def private_ip() -> str:
    """What `hostname -I | cut -d' ' -f1` gives (cluster.yaml's MLFLOW_HOST)."""
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=True).stdout.split()
    assert out, "hostname -I names no address: this machine has no network interface up"
    return out[0]


def test_cluster_yaml_starts_the_head_as_this_test_does():
    ray_start, mlflow = head_commands()
    assert flag(ray_start, "--dashboard-host") == "127.0.0.1"
    assert "--node-ip-address" not in ray_start  # Ray takes the node's private IP
    assert "MLFLOW_HOST=$(hostname -I | cut -d' ' -f1)" in mlflow and flag(mlflow, "--host") == "$MLFLOW_HOST"
    provider = yaml.safe_load((REPO / "cluster.yaml").read_text())["provider"]
    assert provider["security_group"] == {"GroupName": "echoray-ssh-only"}  # no IpPermissions opened


def _env(token: Path, home: Path) -> dict:
    env = without_aws(os.environ)
    for k in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI", "RAY_AUTH_TOKEN"):
        env.pop(k, None)
    return {**env, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "HOME": str(home),
            "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}


def _get(url: str, token: str | None = None, method: str = "GET", body: dict | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = json.dumps(body).encode() if body is not None else None
    if data is not None:
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def role(p: psutil.Process) -> str:
    """Which server a process of the head is, from its name or command line."""
    name, cmd = p.name(), " ".join(p.cmdline())
    for needle, r in (("gcs_server", "gcs"), ("raylet", "raylet"), ("dashboard/dashboard.py", "dashboard"),
                      ("dashboard/agent.py", "dashboard_agent"), ("runtime_env/agent/main.py", "runtime_env_agent"),
                      ("ray.util.client.server", "ray_client_server"), ("log_monitor.py", "log_monitor"),
                      ("monitor.py", "autoscaler_monitor"), ("mlflow", "mlflow"), ("uvicorn", "mlflow"),
                      ("default_worker.py", "worker")):
        if needle in name or needle in cmd:
            return r
    return name


def listening(root: int) -> dict[str, set[tuple[str, int]]]:
    """{role: {(address, port)}} of every listening TCP socket of `root` and its descendants."""
    out: dict[str, set[tuple[str, int]]] = {}
    try:
        procs = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
    except psutil.NoSuchProcess:
        return out
    for p in procs:
        try:
            socks = {(c.laddr.ip, c.laddr.port) for c in p.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
            if socks:
                out.setdefault(role(p), set()).update(socks)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return out


def _wait(pred, timeout_s: float, what: str, *procs: subprocess.Popen):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        for proc in procs:
            assert proc.poll() is None, f"{what}: a server exited with {proc.returncode}"
        got = pred()
        if got:
            return got
        time.sleep(0.5)
    raise TimeoutError(f"{what}: not within {timeout_s} s")


@pytest.fixture(scope="module")
def cluster():
    tmp = Path(tempfile.mkdtemp(prefix="rayexp", dir="/tmp"))
    token, home = tmp / "auth_token", tmp / "home"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    home.mkdir()
    env, ip = _env(token, home), private_ip()
    ray_start, _ = head_commands()
    ports = {"gcs": free_port(), "object_manager": free_port(), "dashboard": free_port(), "mlflow": free_port()}
    agents = {a: free_port() for a in AGENTS}
    head_cmd = [str(BIN / "ray"), "start", "--head", "--block", f"--port={ports['gcs']}",
                f"--object-manager-port={ports['object_manager']}",
                f"--dashboard-host={flag(ray_start, '--dashboard-host')}", f"--dashboard-port={ports['dashboard']}",
                *(f"--{a}-port={p}" for a, p in agents.items()), "--num-cpus=1", "--num-gpus=0",
                f"--temp-dir={tmp / 'ray'}", "--disable-usage-stats", "--include-dashboard=true"]
    mlflow_cmd = [str(BIN / "mlflow"), "server", "--host", ip, "--port", str(ports["mlflow"]),
                  "--backend-store-uri", f"sqlite:///{tmp / 'mlflow.db'}",
                  "--artifacts-destination", str(tmp / "artifacts"), "--workers", "1"]
    logs = {n: open(tmp / f"{n}.log", "w") for n in ("head", "mlflow")}
    head = subprocess.Popen(head_cmd, env=env, stdout=logs["head"], stderr=subprocess.STDOUT, start_new_session=True)
    mlflow = subprocess.Popen(mlflow_cmd, env=env, stdout=logs["mlflow"], stderr=subprocess.STDOUT,
                              start_new_session=True)
    dash = f"http://127.0.0.1:{ports['dashboard']}"
    try:
        # Every port it was given listens (the agents register a few seconds after the GCS).
        wanted = {ports["gcs"], ports["object_manager"], ports["dashboard"], *agents.values()}
        try:
            _wait(lambda: wanted <= {port for s in listening(head.pid).values() for _, port in s}, 120,
                  "the head's ports", head)
            _wait(lambda: _get(f"{dash}/api/version")[0] == 401, 60, "the dashboard", head)
            _wait(lambda: mlflow_up(ip, ports["mlflow"]), 120, "the MLflow server", mlflow)
        except (AssertionError, TimeoutError) as exc:  # the servers' own words, before tmp is removed
            for f in logs.values():
                f.flush()
            said = "\n".join(f"--- {n}.log:\n{(tmp / f'{n}.log').read_text()[-3000:]}" for n in logs)
            raise AssertionError(f"{exc}\n{said}") from None
        yield {"head": head, "mlflow": mlflow, "ip": ip, "ports": ports, "agents": agents, "env": env,
               "token": token.read_text(), "dashboard": dash, "home": home, "tmp": tmp}
    finally:
        stop_cluster(head, tmp)
        stop_process_group(mlflow)
        for f in logs.values():
            f.close()
        shutil.rmtree(tmp, ignore_errors=True)


def mlflow_up(ip: str, port: int) -> bool:
    try:
        return _get(f"http://{ip}:{port}/health")[0] == 200
    except OSError:
        return False


def test_the_head_listens_where_cluster_yaml_says(cluster):
    ray, ports, ip = listening(cluster["head"].pid), cluster["ports"], cluster["ip"]
    shown = json.dumps({k: sorted(v) for k, v in ray.items()}, indent=1)
    socks = {s for v in ray.values() for s in v}
    # The dashboard and the job server (one HTTP server): the head's loopback only.
    assert ("127.0.0.1", ports["dashboard"]) in ray["dashboard"], shown
    assert {a for a, p in socks if p == ports["dashboard"]} == {"127.0.0.1"}, shown
    # MLflow: the private IP only, nothing on loopback or on every interface.
    assert {s for v in listening(cluster["mlflow"].pid).values() for s in v} == {(ip, ports["mlflow"])}
    # The GCS: every interface (the security group admits only the cluster's own nodes).
    assert ray["gcs"] == {("::", ports["gcs"])}, shown
    # The object manager and the agents' ports: the node's addresses, none on loopback alone.
    for port in (ports["object_manager"], cluster["agents"]["dashboard-agent-listen"]):
        assert {a for a, p in socks if p == port} - {"127.0.0.1"}, shown


PROTECTED = [("GET", "/api/version"), ("GET", "/api/jobs/"), ("GET", "/api/jobs/raysubmit_none"),
             ("GET", "/api/jobs/raysubmit_none/logs"), ("POST", "/api/jobs/raysubmit_none/stop"),
             ("GET", "/api/v0/nodes"), ("GET", "/api/cluster_status"), ("GET", "/nodes?view=summary")]


def test_the_token_is_asked_at_every_entrypoint(cluster):
    dash, token = cluster["dashboard"], cluster["token"]
    submit = ("POST", "/api/jobs/", {"entrypoint": "echo exposed"})
    for method, path, *body in [*PROTECTED, submit]:
        for sent, refused in ((None, 401), ("0" * 64, 403)):  # no token, a wrong one
            code, text = _get(dash + path, sent, method, body[0] if body else None)
            assert code == refused, (method, path, sent, code, text[:300])
    # The refused submission started nothing; with the token the same API answers.
    code, text = _get(f"{dash}/api/jobs/", token)
    assert code == 200 and json.loads(text) == [], text[:300]
    assert json.loads(_get(f"{dash}/api/authentication_mode")[1])["authentication_mode"] == "token"

    # The README's `ray job submit` from a shell without the token (none in ~/.ray either):
    # with RAY_AUTH_MODE=token as the README exports, and without it.
    no_token = {k: v for k, v in cluster["env"].items() if k != "RAY_AUTH_TOKEN_PATH"}
    for env in (no_token, {k: v for k, v in no_token.items() if k != "RAY_AUTH_MODE"}):
        res = subprocess.run([str(BIN / "ray"), "job", "submit", "--address", dash, "--", "echo", "exposed"],
                             env=env, capture_output=True, text=True, timeout=120)
        out = res.stdout + res.stderr
        assert res.returncode != 0 and "authentication token" in out, out[-2000:]
        assert "exposed" not in res.stdout.replace("echo exposed", "")
    code, text = _get(f"{dash}/api/jobs/", token)
    assert json.loads(text) == [], text[:300]

    # `ray status` (the GCS) from a shell without the token nor RAY_AUTH_MODE: refused with
    # Ray's AuthenticationError. (With RAY_AUTH_MODE=token and no token, Ray 2.60's `ray status`
    # aborts with a C++ stack trace instead: Ray's message, not echoray's; seen here.)
    gcs = f"{cluster['ip']}:{cluster['ports']['gcs']}"
    no_mode = {k: v for k, v in no_token.items() if k != "RAY_AUTH_MODE"}
    res = subprocess.run([str(BIN / "ray"), "status", "--address", gcs], env=no_mode, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode != 0 and "Authentication token is missing or incorrect" in res.stderr + res.stdout
