"""What `echoray bench-input` measures besides rows: CPU time of the actors, machine load.

`actor_cpu_s` sums the user + system CPU seconds of the Ray Data actor processes on this
node (their pids from Ray's public state API, their times from psutil), so a run can
report images per CPU-second: a rate that holds however many cores the machine lends.
`busy_machine` is the warning bench-input prints when the 1-minute load average at its
start is above the number of cores this process may run on: other work then already
fills the CPUs, and every rate measured is a share of them, not the machine's.
"""

from __future__ import annotations

import os

MAP_WORKER = "MapWorker"  # Ray Data's actor-pool worker class (_MapWorker) carries this in its name


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def busy_machine(load_1m: float | None = None, cores: int | None = None) -> str | None:
    """echoray's warning when the load average is above the core count, else None."""
    load = os.getloadavg()[0] if load_1m is None else load_1m
    cores = usable_cores() if cores is None else cores
    if load <= cores:
        return None
    return (f"warning: the load average is {load:.1f} on {cores} core(s) before the benchmark starts: other "
            "processes already use the CPUs, so the rates below are a share of them; measure on a quiet machine")


def actor_pids() -> list[int]:
    """Pids of this node's live Ray Data actor-pool workers: among this process's
    descendants (a local Ray's workers) by their `ray::` title, a /proc scan of a few ms;
    else (a cluster's Ray, not started here) from Ray's state API, which on a loaded
    machine took seconds and would stall the batches being timed."""
    return _descendant_pids() or _state_api_pids()


def _state_api_pids() -> list[int]:
    import ray
    from ray.util.state import list_actors

    try:
        node = ray.get_runtime_context().get_node_id()
        actors = list_actors(filters=[("state", "=", "ALIVE")], limit=10_000, timeout=5,
                             raise_on_missing_output=False)
    except Exception:  # the dashboard (state API) is not reachable
        return []
    return [a.pid for a in actors if MAP_WORKER in (a.class_name or "") and a.pid and a.node_id == node]


def _descendant_pids() -> list[int]:
    import psutil

    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            title = " ".join(p.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if title.startswith("ray::") and MAP_WORKER in title:
            out.append(p.pid)
    return out


def cpu_s(pids: list[int]) -> dict[int, float]:
    """User + system CPU seconds so far of each pid still running."""
    import psutil

    out = {}
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            out[pid] = t.user + t.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


def actor_cpu_s() -> dict[int, float]:
    """CPU seconds so far of every live actor of the pool on this node, by pid."""
    return cpu_s(actor_pids())


def cpu_between(start: dict[int, float], end: dict[int, float]) -> float:
    """CPU seconds the actors spent between two samples; an actor first seen at `end`
    counts from its start (its whole life lies in the window)."""
    return sum(t - start.get(pid, 0.0) for pid, t in end.items())


def driver_cpu_s() -> float:
    t = os.times()
    return t.user + t.system
