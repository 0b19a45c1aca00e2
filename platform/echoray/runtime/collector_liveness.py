"""The run's liveness in its collector (runtime/collector.py): the last progress, the first
step, the workers' latest heartbeats, the run's fatal error and the abort flag the
workers look at.

A part of RunCollector: it owns `last_progress`, `first_step_at`, `reads_at_first_step`,
`workers`, `fatal_error` and `aborted`; a heartbeat also feeds the rates
(runtime/collector_intake.py `_on_beat`) and a recovery's first step
(runtime/collector_attempts.py `_on_progress`).
"""

from __future__ import annotations

import time
from typing import Any

from echoray.records import Heartbeat


class RunLiveness:
    def _init_liveness(self) -> None:
        self.last_progress = time.time()
        self.first_step_at: float | None = None
        self.reads_at_first_step: int | None = None
        self.workers: dict[int, Heartbeat] = {}  # rank -> its latest heartbeat
        self.fatal_error: dict[str, str] | None = None  # {"kind": "data" | "diverged", "message"}
        self.aborted: str | None = None  # the driver gave up: workers stop (see heartbeat)

    def heartbeat(self, beat: Heartbeat) -> bool:
        """Progress from a worker; answers whether the run was aborted."""
        now = time.time()
        self.workers[beat.rank] = beat
        if self.first_step_at is None and beat.steps > 0:
            self.first_step_at = now
            self.reads_at_first_step = self.source_reads  # what the pipeline read before training began
        self._on_progress(beat.steps, now)
        self.last_progress = now
        self._on_beat(beat, now)
        return self.aborted is not None

    def fatal(self, message: str, kind: str = "data") -> None:
        """An error no retry can fix; the first one is what the driver reports."""
        if self.fatal_error is None:
            self.fatal_error = {"kind": kind, "message": message}
            self.abort(message)

    def abort(self, reason: str) -> None:
        """The run is over (a fatal error, or the driver failed or was interrupted):
        workers stop at their next heartbeat, and a worker group Ray Train restarts
        returns at once, so no training goes on behind a driver that stopped waiting."""
        if self.aborted is None:
            self.aborted = reason

    def is_aborted(self) -> bool:
        return self.aborted is not None

    def sync(self) -> bool:
        """A barrier: calls from one caller run in order, so earlier sends have landed."""
        return True

    def _tick(self) -> dict[str, Any] | None:
        """All workers' counters now (runtime/progress.py Tick); fresh is None until a
        worker reports it."""
        if not self.workers:
            return None
        beats = self.workers.values()
        fresh = [b.fresh for b in beats]
        return {"t": time.time(), "steps": max(b.steps for b in beats), "trained": sum(b.samples for b in beats),
                "fresh": sum(fresh) if any(fresh) else None}
