"""Helpers for the benchmarks: in-process runs on one Ray, peak memory of the process tree,
and the one recorded form of every results file (`save`).

Every benchmarks/results/NAME.json a benchmark writes carries, at its top level,

    "load_avg":   {"start": 1-min load average when the benchmark started (this module's
                   import, the first thing each script does), "end": when it saved,
                   "start_1_5_15": [...], "end_1_5_15": [...]}
    "provenance": {"commit" (HEAD when the benchmark started), "clean" (no change to a
                   tracked or untracked file outside benchmarks/results/ at the start and
                   at the save, and HEAD unchanged), "seeds", "repeats", "started" and
                   "ended" (UTC), "cpus", "foreign_cpu_share" (benchmarks/provenance.py:
                   other processes' share of the machine's busy CPU over the run),
                   "own_cpu_s", "foreign_cpu_s", "busy_cpu_s", "rejected_attempts" (the
                   foreign shares of the earlier runs of this part that make bench threw
                   away), "allow_dirty", "command", "args", "python"}

benchmarks/report.py reads that form: a file without it, from a dirty tree, or with a
foreign CPU share above 0.05 is shown as "not a figure".
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import provenance as cpu
import psutil

REPO = Path(__file__).resolve().parents[1]
# ECHORAY_BENCH_RESULTS: somewhere else (a smoke run's results are not the benchmark's).
RESULTS = Path(os.environ.get("ECHORAY_BENCH_RESULTS") or Path(__file__).parent / "results")
PIPELINE: str | None = None  # what train_in_process trains (None: the embedded digits default)
sys.path.insert(0, str(REPO / "platform"))
# benchmarks/ importable in every Ray process a script starts (they inherit the environment):
# the emulated slow store is a reader by import path, slow_store:SlowStore (slow_store.py).
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "benchmarks"), os.environ.get("PYTHONPATH")]))
START_LOAD = os.getloadavg()  # the benchmark's start: every script imports this module first


def tree_pss(root: psutil.Process) -> int:
    """PSS of a process and all its descendants (shared pages counted once overall)."""
    total = 0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    for p in procs:
        try:
            total += p.memory_full_info().pss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


class PeakMemory:
    """Samples the PSS of this process tree (driver + local Ray) in the background."""

    def __init__(self, interval_s: float = 0.5):
        self.interval_s, self.peak, self._stop = interval_s, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process(os.getpid())
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_pss(me))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def train_in_process(overrides: list[str], name: str) -> tuple[dict, int]:
    """One `echoray train` of PIPELINE with `overrides` on the already-started local Ray;
    returns (summary, peak PSS bytes)."""
    from echoray.config_load import load_config
    from echoray.run import train

    with tempfile.TemporaryDirectory() as d:
        cfg = load_config(PIPELINE, [f"tracking.uri=sqlite:///{d}/mlflow.db", *overrides])
        with PeakMemory() as mem:
            summary = train(cfg, f"benchmark:{name}", str(Path(d) / name), time.time())
    return summary, mem.peak


def _git(*args: str) -> str | None:
    try:
        res = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() if res.returncode == 0 else None


def settled_load(max_load: float = 2.5, timeout_s: float = 120.0, poll_s: float = 5.0) -> tuple:
    """The load average once its 1-minute value is at most `max_load`, or after `timeout_s`
    (the last reading, whatever it is). Taken before a part starts and after its Ray has
    shut down, so that the benchmark's own start-up and shut-down are not read as other
    work: on the 2-core machine a quiet part's level boundary read 3.5-3.8 (its own Ray
    Train actors, no other process), while other work keeps the load up and never settles."""
    deadline = time.monotonic() + timeout_s
    while os.getloadavg()[0] > max_load and time.monotonic() < deadline:
        time.sleep(poll_s)
    return os.getloadavg()


def quiet_machine(max_busy_cores: float = 0.25, window_s: float = 2.0, timeout_s: float = 120.0) -> float:
    """Waits until the machine's busy cores over `window_s` (provenance.busy_cores) are at
    most `max_busy_cores`, or `timeout_s`; returns the last reading. Taken before each run
    of a benchmark that runs many (accelerator.py): the previous run's Ray has exited and
    nothing else runs. The 1-minute load average is no such test: it still carries the
    previous run's own 2 actors, worker and Ray for minutes after they ended."""
    deadline = time.monotonic() + timeout_s
    busy = cpu.busy_cores(window_s)
    while busy > max_busy_cores and time.monotonic() < deadline:
        busy = cpu.busy_cores(window_s)
    return round(busy, 3)


class RunCpu:
    """The CPU of one run inside a benchmark (`with RunCpu() as use: ...`, then `use.record`):
    provenance.window_use over the run, own processes as for the whole file (this process,
    its descendants, the part's session under make bench)."""

    def __enter__(self) -> RunCpu:
        self.monitor, self.t0, self.record = cpu.CpuMonitor(session=_own_session()).start(), time.monotonic(), {}
        return self

    def __exit__(self, *exc) -> None:
        result = self.monitor.result()
        self.monitor.stop()
        self.record = cpu.window_use(result, time.monotonic() - self.t0)


def load_avg(start: tuple[float, float, float] | None = None, end: tuple[float, float, float] | None = None) -> dict:
    """The recorded load form: 1-min load average at `start` (default: the benchmark's
    start) and at `end` (default: now), and the 1/5/15-min triples."""
    start = tuple(start or START_LOAD)
    end = tuple(end or os.getloadavg())
    return {"start": start[0], "end": end[0], "start_1_5_15": list(start), "end_1_5_15": list(end)}


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def tree_state() -> tuple[str | None, bool | None]:
    """(HEAD, whether no tracked or untracked file outside benchmarks/results/ differs)."""
    status = _git("status", "--porcelain", "--", ".", ":(exclude)benchmarks/results")
    return _git("rev-parse", "HEAD"), (not status) if status is not None else None


def _own_session() -> int | None:
    """The session whose processes count as the benchmark's own: under `make bench`
    (ECHORAY_BENCH_PART set, each part in a session of its own) the part's, else none."""
    return os.getsid(0) if os.environ.get("ECHORAY_BENCH_PART") else None


class _Start:
    """The run's start: HEAD, cleanliness and the CPU monitor, taken when a benchmark script
    imports this module (or at the first save, in a process that is no benchmark script:
    a test, a Ray worker importing a benchmark module starts nothing)."""

    commit: str | None = None
    clean: bool | None = None
    monitor: cpu.CpuMonitor | None = None

    @classmethod
    def take(cls) -> type[_Start]:
        if cls.monitor is None:
            cls.commit, cls.clean = tree_state()
            # own: this process, its descendants (its Ray) and, under `make bench`
            # (ECHORAY_BENCH_PART set, each part in a session of its own), the part's session
            cls.monitor = cpu.CpuMonitor(session=_own_session()).start()
        return cls


if Path(getattr(sys.modules.get("__main__"), "__file__", None) or "-").resolve().parent == Path(__file__).parent.resolve():
    _Start.take()


def provenance(args=None, **extra) -> dict:
    """The recorded `provenance` form (see the module docstring): commit and cleanliness at
    the start and now, the foreign CPU share so far, the seeds/repeats of the run (from
    argparse `args` where it has them, or `extra`)."""
    a = vars(args) if args is not None else {}
    start = _Start.take()
    commit, clean = tree_state()
    shares = start.monitor.result()
    attempts = json.loads(os.environ.get("ECHORAY_BENCH_ATTEMPTS") or "[]")
    return {"commit": start.commit, "clean": bool(start.clean and clean and commit == start.commit),
            "seeds": extra.pop("seeds", a.get("seeds")), "repeats": extra.pop("repeats", a.get("repeats")),
            "started": _utc(start.monitor.started), "ended": _utc(time.time()), "cpus": os.cpu_count(),
            **shares, "rejected_attempts": attempts,
            "allow_dirty": os.environ.get("BENCH_ALLOW_DIRTY") == "1",
            "command": [Path(sys.argv[0]).name, *sys.argv[1:]], "args": a,
            "python": platform.python_version(), **extra}


def save(name: str, obj: dict, args=None, *, start_load=None, end_load=None, path: Path | None = None,
         **extra) -> Path:
    """Write RESULTS/NAME.json (or `path`) with the recorded `load_avg` and `provenance`
    (see the module docstring) added at its top level."""
    path = Path(path) if path is not None else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {**obj, "load_avg": load_avg(start_load, end_load), "provenance": provenance(args, **extra)}
    path.write_text(json.dumps(record, indent=2, default=str))
    return path
