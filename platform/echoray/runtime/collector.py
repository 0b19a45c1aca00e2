"""A zero-CPU actor that gathers what workers and preprocessing actors report.

Workers and actors send events here without waiting (preprocessing actors batch theirs,
at most one call per actor every 0.5 s: runtime/collector_feed.py); the driver polls it
to print progress, log MLflow metrics from rank 0 only, spot stalls and write the audit.
Working through an actor rather than files keeps it correct on a multi-node cluster
where the driver's disk is not the workers'.

The decisions are pure parts it only hosts, each with its own unit test:
- runtime/epoch_ledger.py: which epoch records are final (checkpoints, restarts, replays);
- runtime/auto_echo.py: `echo.factor: auto`'s control law over runtime/throughput.py's
  live figures (R, the factor and its history);
- runtime/bad_examples.py: the budget of undecodable training examples.
What is left here is the run's liveness (last progress, first step and read, worker
groups started and recovered, failures, the abort flag) and the audit rows. Errors that a
retry cannot fix (bad data) are recorded by `fatal` so the driver stops at once.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray

from echoray.records import Heartbeat
from echoray.runtime.auto_echo import AutoEcho
from echoray.runtime.bad_examples import BadExamples
from echoray.runtime.epoch_ledger import EpochLedger
from echoray.runtime.throughput import Throughput


@ray.remote(num_cpus=0, max_restarts=0)
class RunCollector:
    def __init__(self, factor: float | str = 1.0, max_factor: float = 8.0, *, checkpointed: bool = False,
                 n_train: int = 0, max_bad_fraction: float = 0.0, resume: dict[str, Any] | None = None,
                 start_factor: float | None = None):
        self.ledger = EpochLedger.resumed(checkpointed, resume)
        self.throughput = Throughput()
        self.echo = AutoEcho(factor, max_factor, self.throughput, time.time(),
                             resumed_factor=resume.get("echo_factor") if resume else None, start_factor=start_factor)
        self.bad = BadExamples(n_train, max_bad_fraction)
        self.audit: list[dict[str, np.ndarray]] = []
        self.last_progress = time.time()
        self.first_step_at: float | None = None
        self.first_read_at: float | None = None
        self.source_reads = 0
        self.reads_at_first_step: int | None = None
        self.recoveries: list[dict[str, Any]] = []
        self.failures: list[dict[str, Any]] = []
        self.fatal_error: dict[str, str] | None = None  # {"kind": "data" | "diverged", "message"}
        self.aborted: str | None = None  # the driver gave up: workers stop (see heartbeat)
        self.controller = None  # Ray Train's controller actor, so the driver can stop it
        self.seeded = bool(resume)
        self.attempts = 0  # worker groups started
        self.workers: dict[int, Heartbeat] = {}  # rank -> its latest heartbeat
        self.model: tuple[dict[str, Any], int] | None = None  # rank 0's final weights, their epoch

    # --- from preprocessing actors ---
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

    # --- from train workers ---
    def heartbeat(self, beat: Heartbeat) -> bool:
        """Progress from a worker; answers whether the run was aborted. Its trained samples
        (batch-augmentation views counted once) are the rate behind the downstream figure and R."""
        now = time.time()
        self.workers[beat.rank] = beat
        if self.first_step_at is None and beat.steps > 0:
            self.first_step_at = now
            self.reads_at_first_step = self.source_reads  # what the pipeline read before training began
        if self.recoveries and self.recoveries[-1]["first_step_at"] is None \
                and beat.steps > self.recoveries[-1]["steps"]:
            self.recoveries[-1]["first_step_at"] = now
        self.last_progress = now
        self.throughput.set_worker(beat.rank, beat.samples, beat.step_s, beat.wait_s, beat.fresh)
        self.echo.on_heartbeat(now, self.first_step_at)
        return self.aborted is not None

    def event(self, record: dict[str, Any]) -> None:
        self.last_progress = time.time()
        self.ledger.add(record)

    def add_audit(self, columns: dict[str, np.ndarray]) -> None:
        self.audit.append(columns)

    def attempt_started(self, epoch: int, steps: int) -> str | None:
        """Rank 0 of a worker group starts from the checkpoint of `epoch` (0: from scratch):
        forget what an earlier attempt reported after it. Returns the checkpoint the
        training stream was built for, which must be the one the workers restored."""
        self.attempts += 1
        self.last_progress = time.time()
        checkpoint = self.ledger.restart_from(epoch)
        self.audit = [{k: v[part["step"] < steps] for k, v in part.items()} for part in self.audit]
        # The first attempt of a run resumed by a new driver is the resume, not a failure.
        kind = "start" if self.attempts == 1 and not self.seeded else (
            "resume" if self.attempts == 1 else "restart")
        if kind != "start":
            self.recoveries.append({"kind": kind, "from_epoch": epoch, "steps": steps,
                                    "restored_at": time.time(), "first_step_at": None})
        return checkpoint

    def finish(self, record: dict[str, Any]) -> None:
        """Rank 0's final record. Not the end of the attempt: see runtime/epoch_ledger.py."""
        self.ledger.finish(record)

    def keep_model(self, weights: dict[str, Any], epoch: int) -> None:
        """Rank 0's weights as the fit ended (a later attempt's replace them), held until the
        driver logs them as the run's MLflow model (tracking_model.py)."""
        self.model = (weights, epoch)

    def take_model(self) -> tuple[dict[str, Any], int] | None:
        out, self.model = self.model, None
        return out

    def sync(self) -> bool:
        """A barrier: calls from one caller run in order, so earlier sends have landed."""
        return True

    # --- from Ray Train's controller (runtime/commit.py) ---
    def committed(self, checkpoint, metrics: dict[str, Any]) -> None:
        self.ledger.committed(checkpoint, metrics)

    def failed(self, detected_at: float, errors: str) -> None:
        self.failures.append({"detected_at": detected_at, "errors": errors})

    def latest_checkpoint(self) -> dict[str, Any] | None:
        return self.ledger.commit

    def register_controller(self, handle) -> None:
        self.controller = handle

    def get_controller(self):
        return self.controller

    # --- for the driver ---
    def poll(self, since: int, factor_since: int = 0, final_since: int = 0, ended: bool = False) -> dict[str, Any]:
        """ended: the fit has returned (no worker group can replay an epoch any more)."""
        up, down = self.throughput.rates()
        return {
            "events": self.ledger.events[since:],
            "final_events": self.ledger.final_after(final_since, ended),
            "factor_history": self.echo.history[factor_since:],
            "last_progress": self.last_progress,
            "first_step_at": self.first_step_at,
            "reads_at_first_step": self.reads_at_first_step,
            "first_read_at": self.first_read_at,
            "source_reads": self.source_reads,
            "upstream_examples_per_s": up,
            "downstream_examples_per_s": down,
            "measured_R": down / up if up and down else None,
            "echo_factor": self.echo.factor,
            "final": self.ledger.final,
            "fatal": self.fatal_error,
            "recoveries": self.recoveries,
            "failures": self.failures,
            "bad_examples": len(self.bad.bad),
            "bad_files": self.bad.shown_files(),
            "tick": self._tick(),
        }

    def _tick(self) -> dict[str, Any] | None:
        """All workers' counters now (runtime/progress.py Tick); fresh is None until a
        worker reports it."""
        if not self.workers:
            return None
        beats = self.workers.values()
        fresh = [b.fresh for b in beats]
        return {"t": time.time(), "steps": max(b.steps for b in beats), "trained": sum(b.samples for b in beats),
                "fresh": sum(fresh) if any(fresh) else None}

    def take_audit(self) -> list[dict[str, np.ndarray]]:
        out, self.audit = self.audit, []
        return out
