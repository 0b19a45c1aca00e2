"""cluster.yaml's node types on Ray's fake multi-node provider: a head started with
`ray start --head --autoscaling-config`, and the autoscaler (v2, as `ray up` runs it)
"launching" worker nodes as extra raylets on this machine. No cloud, no SSH.

Only what must differ on one machine differs: the head type takes the provider's fixed
name, CPU counts shrink to fit two cores, and a GPU is emulated by the node type's own
`gpu_node` resource (declaring GPU would make torch look for CUDA). Ray's helper
`AutoscalingCluster` is not used: it runs `ray stop --force`, which would stop every
Ray on the machine, and its default config is missing from the 2.60 wheel.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import psutil
import yaml
from ray.autoscaler._private.fake_multi_node.node_provider import (
    FAKE_HEAD_NODE_ID,
    FAKE_HEAD_NODE_TYPE,
)

PROVIDER = "ray.autoscaler._private.fake_multi_node.node_provider.FakeMultiNodeProvider"
OBJECT_STORE = 300_000_000  # per node; the digits data is a few MB


def fake_autoscaling_config(cluster_yaml: Path, gcs_address: str, worker_cpus: dict[str, int],
                            idle_timeout_minutes: float) -> dict:
    src = yaml.safe_load(cluster_yaml.read_text())
    types = {}
    for name, t in src["available_node_types"].items():
        resources = {k: v for k, v in t["resources"].items() if k != "GPU"}
        if name == src["head_node_type"]:
            types[FAKE_HEAD_NODE_TYPE] = {"resources": resources, "node_config": {}, "max_workers": 0}
        elif name in worker_cpus:  # the types a test names (cpu_spot_worker is cpu_worker's twin)
            resources.update(CPU=worker_cpus[name], object_store_memory=OBJECT_STORE)
            types[name] = {"resources": resources, "node_config": {}, "min_workers": t["min_workers"],
                           "max_workers": t["max_workers"]}
    return {
        "cluster_name": src["cluster_name"], "max_workers": src["max_workers"],
        "upscaling_speed": src["upscaling_speed"], "idle_timeout_minutes": idle_timeout_minutes,
        # "external" loads the provider class directly (the fake_multinode type would look
        # for a defaults file the wheel does not ship). The provider joins new nodes to
        # this head's GCS, not to the default port 6379.
        "provider": {"type": "external", "module": PROVIDER, "gcs_address": gcs_address,
                     "head_node_id": FAKE_HEAD_NODE_ID, "launch_multiple": True,
                     "disable_node_updaters": True, "disable_launch_config_check": True},
        "available_node_types": types, "head_node_type": FAKE_HEAD_NODE_TYPE,
        "auth": {}, "docker": {}, "file_mounts": {}, "cluster_synced_files": [],
        "file_mounts_sync_continuously": False, "rsync_exclude": [], "rsync_filter": [],
        "initialization_commands": [], "setup_commands": [], "head_setup_commands": [],
        "worker_setup_commands": [], "head_start_ray_commands": [], "worker_start_ray_commands": [],
    }


def head_env(base: dict) -> dict:
    """What `ray up` sets for the head's `ray start`, plus the fake provider's switch."""
    return {**base, "RAY_FAKE_CLUSTER": "1", "RAY_enable_autoscaler_v2": "1",
            "RAY_CLOUD_INSTANCE_ID": FAKE_HEAD_NODE_ID, "RAY_NODE_TYPE_NAME": FAKE_HEAD_NODE_TYPE}


def head_command(ray_bin: Path, tmp: Path, gcs_port: int, dash_port: int, head_cpus: int,
                 config_path: Path, free_port) -> list[str]:
    # Every fixed default port gets a free one: other Ray clusters run on this machine, and
    # a taken dashboard-agent port leaves the head without a job agent.
    ports = {f"--{name}-port={free_port()}" for name in (
        "dashboard-agent-listen", "dashboard-agent-grpc", "metrics-export", "runtime-env-agent", "ray-client-server")}
    return [str(ray_bin), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={gcs_port}",
            "--dashboard-host=127.0.0.1", f"--dashboard-port={dash_port}", *sorted(ports),
            f"--num-cpus={head_cpus}", "--num-gpus=0", f"--object-store-memory={OBJECT_STORE}",
            f"--temp-dir={tmp}", "--disable-usage-stats", f"--autoscaling-config={config_path}"]


# Teardown of servers the tests are done with: nothing they check depends on a graceful
# stop, so every process gets SIGTERM at once and SIGKILL what is left after GRACE_S.
# (`ray start --block` stopping its processes one by one on SIGTERM took 10-15 s per head,
# the GCS and the autoscaler waiting out their own timeouts: 11-15 s of teardown per e2e
# head in CI, where the GCS and raylet were SIGKILLed anyway.)
GRACE_S = 2.0


def stop_pids(pids: set[int], grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM to every process of `pids` still running, SIGKILL to those left after
    `grace_s`; returns the pids that needed SIGKILL."""
    procs = [p for p in map(_process, pids) if p is not None]
    for p in procs:
        _signal(p, signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        _signal(p, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=10)
    return sorted(p.pid for p in alive)


def stop_cluster(head: subprocess.Popen, tmp: Path, grace_s: float = GRACE_S) -> list[int]:
    """Stop the head and every node the autoscaler started: the head's process tree plus any
    process naming this cluster's temp dir (never another cluster's). Returns the pids that
    were still running after the grace period and got SIGKILL."""
    killed = stop_pids({head.pid} | _descendants(head.pid) | _naming(str(tmp)), grace_s)
    killed += stop_pids(_naming(str(tmp)), grace_s)  # a node the autoscaler was launching meanwhile
    head.wait(timeout=10)
    return killed


def _descendants(pid: int) -> set[int]:
    try:
        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def _naming(text: str) -> set[int]:
    found = set()
    for p in psutil.process_iter(["pid", "cmdline", "uids"]):
        try:
            if p.info["uids"] and p.info["uids"].real == os.getuid() and text in " ".join(p.info["cmdline"] or ()):
                found.add(p.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found - {os.getpid()}


def stop_process_group(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """Stop a server started with start_new_session: its leader, its descendants (Ray's
    workers have process groups of their own) and whatever else is in its process group."""
    stop_pids({proc.pid} | _descendants(proc.pid) | _group(proc.pid), grace_s)
    proc.wait(timeout=10)


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def _signal(p: psutil.Process, sig: int) -> None:
    try:
        p.send_signal(sig)
    except psutil.NoSuchProcess:
        pass


def _group(pgid: int) -> set[int]:
    out = set()
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.info["pid"]) == pgid:
                out.add(p.info["pid"])
        except (ProcessLookupError, PermissionError):
            pass
    return out
