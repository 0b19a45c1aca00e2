"""Helpers for the benchmarks: in-process runs on one Ray, peak memory of the process tree."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
# ECHORAY_BENCH_RESULTS: somewhere else (a smoke run's results are not the benchmark's).
RESULTS = Path(os.environ.get("ECHORAY_BENCH_RESULTS") or Path(__file__).parent / "results")
PIPELINE: str | None = None  # what train_in_process trains (None: the embedded digits default)
sys.path.insert(0, str(REPO / "platform"))


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


def save(name: str, obj: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(obj, indent=2, default=str))
    return path
