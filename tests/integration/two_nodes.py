"""A Ray cluster of two nodes (one CPU each) on this machine, run by a process of its own.

`ray.cluster_utils.Cluster` runs its nodes from the process that makes it, and its
shutdown resets that process's internal KV client (`_internal_kv_reset`, Ray 2.60): made
in the test process, it would break the session's local Ray for the tests after it (Tune
registers its trainables through that client). So the cluster lives in a child process,
which prints its address once both nodes are up and shuts the cluster down when its stdin
closes (the test ended, or the test process died)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

READY = "address "


def main() -> None:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        print(READY + cluster.address, flush=True)
        sys.stdin.read()  # until the test closes it
    finally:
        cluster.shutdown()


@contextlib.contextmanager
def two_node_cluster(timeout_s: float = 180) -> Iterator[str]:
    """The GCS address of a fresh two-node cluster, for the `with` block's time."""
    # Unbuffered: a raw pipe's readline reads up to the newline only, so select() never
    # misses a line already read into a buffer.
    proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                            start_new_session=True)
    try:
        yield _address(proc, timeout_s)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the nodes' processes are in its group
            proc.wait()


def _address(proc: subprocess.Popen, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([proc.stdout], [], [], left)[0]:
            break
        line = proc.stdout.readline().decode()
        if not line:
            raise RuntimeError(f"the two-node cluster's process exited with {proc.wait()} before it was up")
        if line.startswith(READY):
            return line[len(READY):].strip()
    raise TimeoutError(f"the two-node cluster was not up after {timeout_s:g} s")


if __name__ == "__main__":
    main()
