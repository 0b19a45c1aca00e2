"""A Ray cluster of two nodes (one CPU each) on this machine, run by a process of its own.

`ray.cluster_utils.Cluster` runs its nodes from the process that makes it, and its
shutdown resets that process's internal KV client (`_internal_kv_reset`, Ray 2.60): made
in the test process, it would break the session's local Ray for the tests after it (Tune
registers its trainables through that client). So the cluster lives in a child process,
which prints its address once both nodes are up and shuts the cluster down when its stdin
closes (the test ended, or the test process died). A line `remove` on its stdin takes the
second node away as a lost machine goes (its processes killed, not drained): `TwoNodes.lose_second`."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

READY = "address "
REMOVED = "removed"


def main(head: dict | None = None, second: dict | None = None, dashboard_port: int | None = None) -> None:
    """`head`, `second`: custom resources of each node (one CPU each, or "num_cpus");
    `dashboard_port`: the head's (a node's default is 8265, with no retry when taken)."""
    from ray.cluster_utils import Cluster

    head, second = dict(head or {}), dict(second or {})
    head_args = {"num_cpus": head.pop("num_cpus", 1), "resources": head}
    cluster = Cluster(initialize_head=True, head_node_args={
        **head_args, **({"dashboard_port": dashboard_port} if dashboard_port else {})})
    try:
        node = cluster.add_node(num_cpus=second.pop("num_cpus", 1), resources=second)
        cluster.wait_for_nodes()
        print(READY + cluster.address, flush=True)
        for line in sys.stdin:  # until the test closes it
            if line.strip() == "remove" and node is not None:
                cluster.remove_node(node, allow_graceful=False)
                node = None
                print(REMOVED, flush=True)
    finally:
        cluster.shutdown()


class TwoNodes:
    """The cluster's process: its GCS address, and the loss of its second node."""

    def __init__(self, proc: subprocess.Popen, address: str):
        self.proc, self.address = proc, address

    def lose_second(self, timeout_s: float = 60) -> None:
        """Kill the second node's processes; returns once Ray has been told."""
        self.proc.stdin.write(b"remove\n")
        self.proc.stdin.flush()
        _line(self.proc, REMOVED, timeout_s)


@contextlib.contextmanager
def two_node_cluster(timeout_s: float = 180) -> Iterator[str]:
    """The GCS address of a fresh two-node cluster, for the `with` block's time."""
    with two_nodes(timeout_s=timeout_s) as cluster:
        yield cluster.address


@contextlib.contextmanager
def two_nodes(head: dict | None = None, second: dict | None = None, timeout_s: float = 180) -> Iterator[TwoNodes]:
    """A fresh two-node cluster (`main`'s resources), for the `with` block's time."""
    # Unbuffered: a raw pipe's readline reads up to the newline only, so select() never
    # misses a line already read into a buffer.
    # The head's dashboard on a port of the tests' own (helpers.free_port): at 8265, the
    # default, it failed to start beside another local Ray of a parallel test worker.
    # Imported here: the test process has tests/ on its path, this file's own process not.
    from helpers import free_port

    args = json.dumps([head or {}, second or {}, free_port()])
    proc = subprocess.Popen([sys.executable, __file__, args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, bufsize=0, start_new_session=True)
    try:
        yield TwoNodes(proc, _line(proc, READY, timeout_s))
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the nodes' processes are in its group
            proc.wait()


def _line(proc: subprocess.Popen, prefix: str, timeout_s: float) -> str:
    """The rest of the cluster process's first line that starts with `prefix`."""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([proc.stdout], [], [], left)[0]:
            break
        line = proc.stdout.readline().decode()
        if not line:
            raise RuntimeError(f"the two-node cluster's process exited with {proc.wait()} before {prefix.strip()!r}")
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    raise TimeoutError(f"no {prefix.strip()!r} from the two-node cluster after {timeout_s:g} s")


if __name__ == "__main__":
    main(*json.loads(sys.argv[1]) if len(sys.argv) > 1 else ())
