"""A zero-CPU actor that gathers what workers and preprocessing actors report.

Workers and actors send events here (fire-and-forget); the driver polls it to
print progress, log MLflow metrics from rank 0 only, spot stalls and write the
audit. Working through an actor rather than files keeps it correct on a
multi-node cluster where the driver's disk is not the workers'.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray


@ray.remote(num_cpus=0, max_restarts=0)
class RunCollector:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.audit: list[dict[str, np.ndarray]] = []
        self.last_progress = time.time()
        self.first_step_at: float | None = None
        self.source_reads = 0
        self.upstream_busy_s = 0.0
        self.final: dict[str, Any] | None = None

    # --- from preprocessing actors ---
    def reads(self, n: int, busy_s: float) -> None:
        self.source_reads += n
        self.upstream_busy_s += busy_s

    # --- from train workers ---
    def heartbeat(self, step: int) -> None:
        now = time.time()
        if self.first_step_at is None and step > 0:
            self.first_step_at = now
        self.last_progress = now

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
    def poll(self, since: int) -> dict[str, Any]:
        return {
            "events": self.events[since:],
            "last_progress": self.last_progress,
            "first_step_at": self.first_step_at,
            "source_reads": self.source_reads,
            "upstream_busy_s": self.upstream_busy_s,
            "final": self.final,
        }

    def take_audit(self) -> list[dict[str, np.ndarray]]:
        out, self.audit = self.audit, []
        return out
