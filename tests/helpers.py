"""Helpers shared by the test tiers (importable because tests/conftest.py puts tests/ on sys.path)."""

from __future__ import annotations

import importlib.util
import os
import random
import socket
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_benchmark(name: str):
    """benchmarks/NAME.py as module NAME (registered in sys.modules: dataclasses look their
    module up), with benchmarks/ on sys.path for its own imports (common, jpeg_set, ...);
    benchmarks/ is scripts, not a package."""
    bench = REPO / "benchmarks"
    if str(bench) not in sys.path:
        sys.path.insert(0, str(bench))
    spec = importlib.util.spec_from_file_location(name, bench / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod

def wait_for(predicate, what: str, timeout_s: float = 300, interval_s: float = 0.1):
    """`predicate()`'s first truthy value, polled every `interval_s`; AssertionError naming
    `what` when none came within `timeout_s`. The one wait on a condition of the tiers."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


# Below the kernel's ephemeral range (ip_local_port_range, 32768-60999 here) and above Ray's
# worker ports (10002-19999 by default): a port handed out here is not taken meanwhile by
# an outgoing connection or by a port a server picks with bind(0).
PORTS = range(20000, 32768)
_given: set[int] = set()


def _own_ports() -> range:
    """This process's share of PORTS: a pytest-xdist worker (the tiers run on every core)
    draws from its own slice, so two workers never hand out the same port."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count <= 1:
        return PORTS
    size = len(PORTS) // count
    start = PORTS.start + int(worker[2:]) * size
    return range(start, start + size)


def free_port() -> int:
    """A TCP port nothing listens on or is connected from, on any address, never handed out
    before by this process. The port is only reserved by being outside the ranges the
    kernel and Ray draw from: ports picked with bind(("127.0.0.1", 0)) came from the
    ephemeral range, where Ray's own bind(0) choices and the cluster's outgoing connections
    also draw, and a head given nine such ports for its agents is what the exposure test
    starts; one such head exited 1 in a suite run here (with --block, `ray start` exits when
    a subprocess dies, as an agent does that cannot bind its port). A port free on
    127.0.0.1 alone could also be in use on the node's own address, where agents listen."""
    rng, ports = random.SystemRandom(), _own_ports()
    for _ in range(10_000):
        port = rng.choice(ports)
        if port in _given or not _bindable(port):
            continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free TCP port in {ports.start}-{ports.stop - 1}")


def _bindable(port: int) -> bool:
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            with socket.socket(family) as s:
                s.bind((host, port))
        except OSError as exc:
            if family == socket.AF_INET6 and exc.errno in (97, 99):  # no IPv6 on this machine
                continue
            return False
    return True
