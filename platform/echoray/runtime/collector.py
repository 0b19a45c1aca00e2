"""A zero-CPU actor that gathers what workers and preprocessing actors report.

Workers and actors send events here (fire-and-forget); the driver polls it to
print progress, log MLflow metrics from rank 0 only, spot stalls and write the
audit. It also owns the live throughput figures and, for `echo.factor: auto`,
the current echo factor. Working through an actor rather than files keeps it
correct on a multi-node cluster where the driver's disk is not the workers'.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray

from echoray.data.echo import next_auto_factor
from echoray.runtime.throughput import Throughput

AUTO_UPDATE_S = 1.0


@ray.remote(num_cpus=0, max_restarts=0)
class RunCollector:
    def __init__(self, factor: float | str = 1.0, max_factor: float = 8.0):
        self.events: list[dict[str, Any]] = []
        self.audit: list[dict[str, np.ndarray]] = []
        self.last_progress = time.time()
        self.first_step_at: float | None = None
        self.source_reads = 0
        self.final: dict[str, Any] | None = None
        self.throughput = Throughput()
        self.auto = factor == "auto"
        self.factor = 1.0 if self.auto else float(factor)
        self.max_factor = max_factor
        self.factor_history: list[dict[str, float]] = []
        self._window = self.throughput.snapshot()
        self._window_at = time.time()

    # --- from preprocessing actors ---
    def stage(self, name: str, actor: str, rows: int, busy_s: float, reads: int = 0) -> None:
        self.throughput.add_stage(name, actor, rows, busy_s)
        self.source_reads += reads

    def echo_factor(self) -> float:
        return self.factor

    # --- from train workers ---
    def heartbeat(self, rank: int, step: int, trained: int, step_s: float) -> None:
        now = time.time()
        if self.first_step_at is None and step > 0:
            self.first_step_at = now
        self.last_progress = now
        self.throughput.set_worker(rank, trained, step_s)
        if self.auto and now - self._window_at >= AUTO_UPDATE_S:
            self._update_factor(now)

    def _update_factor(self, now: float) -> None:
        recent = self.throughput.since(self._window)
        r = recent.measured_r()
        if r is not None:
            self.factor = next_auto_factor(self.factor, r, self.max_factor)
            self.factor_history.append({"time": now, "factor": self.factor, "measured_R": r})
            self._window, self._window_at = self.throughput.snapshot(), now

    def event(self, record: dict[str, Any]) -> None:
        self.last_progress = time.time()
        self.events.append(record)

    def add_audit(self, columns: dict[str, np.ndarray]) -> None:
        self.audit.append(columns)

    def finish(self, record: dict[str, Any]) -> None:
        self.final = record

    def sync(self) -> bool:
        """A barrier: calls from one caller run in order, so earlier sends have landed."""
        return True

    # --- for the driver ---
    def poll(self, since: int, factor_since: int = 0) -> dict[str, Any]:
        up, down = self.throughput.rates()
        return {
            "events": self.events[since:],
            "factor_history": self.factor_history[factor_since:],
            "last_progress": self.last_progress,
            "first_step_at": self.first_step_at,
            "source_reads": self.source_reads,
            "upstream_examples_per_s": up,
            "downstream_examples_per_s": down,
            "measured_R": down / up if up and down else None,
            "echo_factor": self.factor,
            "final": self.final,
        }

    def take_audit(self) -> list[dict[str, np.ndarray]]:
        out, self.audit = self.audit, []
        return out
