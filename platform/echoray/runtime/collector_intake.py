"""What the run's collector (runtime/collector.py) takes from preprocessing actors: their
batched reports (runtime/collector_feed.py), the rates behind R and `auto`'s factor, the
rows read from the source, and undecodable training files against the run's budget.

A part of RunCollector: it owns `throughput`, `echo`, `bad`, `source_reads` and
`first_read_at`, and reads the run's liveness (`first_step_at`, `fatal_error`, `fatal`:
runtime/collector_liveness.py).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from echoray.records import Heartbeat
from echoray.runtime.auto_echo import AutoEcho
from echoray.runtime.bad_examples import BadExamples
from echoray.runtime.throughput import Throughput


class ActorIntake:
    def _init_intake(self, factor: float | str, max_factor: float, n_train: int, max_bad_fraction: float,
                     resumed_factor: float | None, start_factor: float | None) -> None:
        self.throughput = Throughput()
        self.echo = AutoEcho(factor, max_factor, self.throughput, time.time(),
                             resumed_factor=resumed_factor, start_factor=start_factor)
        self.bad = BadExamples(n_train, max_bad_fraction)
        self.first_read_at: float | None = None
        self.source_reads = 0

    def reports(self, actor: str, report: dict[str, Any]) -> dict[str, Any]:
        """One actor's batch since its last (runtime/collector_feed.py Batch.to_report): rows
        and busy seconds per stage, rows read, newly found bad files. The reply is what the
        actor looks at later, never waiting for it: the live echo factor, whether training
        has started, the run's fatal error."""
        now = time.time()
        for name, (rows, busy_s) in report["stages"].items():
            self.throughput.add_stage(name, actor, rows, busy_s, at=now)
        self._count_reads(report["reads"], report["read_began"])
        if report["bad"]:
            self._bad_images(report["bad"])
        return {"factor": self.echo.factor, "started": self.first_step_at is not None, "fatal": self.fatal_error}

    def _count_reads(self, reads: int, began: float | None) -> None:
        """Rows read from the source, the first of them begun at `began` (wall clock)."""
        self.source_reads += reads
        if self.first_read_at is None and reads:
            self.first_read_at = began

    def _on_beat(self, beat: Heartbeat, now: float) -> None:
        """A worker's trained samples (batch-augmentation views counted once): the rate
        behind the downstream figure and R, and `auto`'s control law."""
        self.throughput.set_worker(beat.rank, beat.samples, beat.step_s, beat.wait_s, beat.fresh)
        self.echo.on_heartbeat(now, self.first_step_at)

    def stage_totals(self) -> dict[str, dict[str, float]]:
        """stage -> rows, busy seconds and reporting actors (echoray bench-input)."""
        return {name: {"rows": int(sum(t.rows for t in actors.values())),
                       "busy_s": sum(t.busy_s for t in actors.values()), "actors": len(actors)}
                for name, actors in self.throughput.stages.items()}

    def echo_factor(self) -> float:
        return self.echo.factor

    def _bad_images(self, items: list[tuple[int, str, str]]) -> None:
        """Undecodable training files (id, file, reason): skipped while they stay within
        source.max_bad_fraction of the training split; beyond it the run fails naming them."""
        verdict = self.bad.add(items)
        if verdict["over"]:
            self.fatal(verdict["message"], "data")

    def bad_ids(self) -> np.ndarray:
        return self.bad.ids()
