"""The worker groups of a run in its collector (runtime/collector.py): each attempt's
start, its epoch records and final record (runtime/epoch_ledger.py decides which are
final), its audit rows, rank 0's final weights, and the restarts and resumes it recovered
from.

A part of RunCollector: it owns `ledger`, `audit`, `model`, `recoveries`, `attempts` and `seeded`,
and marks progress (`last_progress`: runtime/collector_liveness.py).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from echoray.runtime.epoch_ledger import EpochLedger


class WorkerAttempts:
    def _init_attempts(self, checkpointed: bool, resume: dict[str, Any] | None) -> None:
        self.ledger = EpochLedger.resumed(checkpointed, resume)
        self.audit: list[dict[str, np.ndarray]] = []
        self.recoveries: list[dict[str, Any]] = []
        self.seeded = bool(resume)
        self.attempts = 0  # worker groups started
        self.model: tuple[dict[str, Any], int] | None = None  # rank 0's final weights, their epoch

    def event(self, record: dict[str, Any]) -> None:
        self.last_progress = time.time()
        self.ledger.add(record)

    def add_audit(self, columns: dict[str, np.ndarray]) -> None:
        self.audit.append(columns)

    def take_audit(self) -> list[dict[str, np.ndarray]]:
        out, self.audit = self.audit, []
        return out

    def attempt_started(self, epoch: int, steps: int) -> str | None:
        """Rank 0 of a worker group starts from the checkpoint of `epoch` (0: from scratch):
        forget what an earlier attempt reported after it. Returns the checkpoint the
        training stream was built for, which must be the one the workers restored."""
        self.attempts += 1
        self.last_progress = time.time()
        checkpoint = self.ledger.restart_from(epoch)
        # The earlier group's heartbeats go: the new group's carry the restored counters, and a
        # resized group (scaling.num_workers [min, max]) has other ranks, whose stale counts
        # the progress lines would add to them (fresh 2,162 of 1,920, test_elastic_group.py).
        self.workers.clear()
        self.audit = [{k: v[part["step"] < steps] for k, v in part.items()} for part in self.audit]
        # The first attempt of a run resumed by a new driver is the resume, not a failure.
        kind = "start" if self.attempts == 1 and not self.seeded else (
            "resume" if self.attempts == 1 else "restart")
        if kind != "start":
            self.recoveries.append({"kind": kind, "from_epoch": epoch, "steps": steps,
                                    "restored_at": time.time(), "first_step_at": None})
        return checkpoint

    def _on_progress(self, steps: int, now: float) -> None:
        """A worker at `steps`: the latest recovery's first step past its checkpoint."""
        if self.recoveries and self.recoveries[-1]["first_step_at"] is None \
                and steps > self.recoveries[-1]["steps"]:
            self.recoveries[-1]["first_step_at"] = now

    def finish(self, record: dict[str, Any]) -> None:
        """Rank 0's final record. Not the end of the attempt: see runtime/epoch_ledger.py."""
        self.ledger.finish(record)

    def keep_model(self, weights: dict[str, Any], epoch: float) -> None:
        """Rank 0's weights as the fit ended (a later attempt's replace them), held until the
        driver logs them as the run's MLflow model (tracking_model.py)."""
        self.model = (weights, epoch)

    def take_model(self) -> tuple[dict[str, Any], float] | None:
        out, self.model = self.model, None
        return out
