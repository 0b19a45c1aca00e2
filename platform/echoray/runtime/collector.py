"""A zero-CPU actor that gathers what workers and preprocessing actors report.

Workers and actors send events here (fire-and-forget); the driver polls it to
print progress, log MLflow metrics from rank 0 only, spot stalls and write the
audit. It also owns the live throughput figures and, for `echo.factor: auto`,
the current echo factor. Working through an actor rather than files keeps it
correct on a multi-node cluster where the driver's disk is not the workers'.

`echo.factor: auto`, the control law. Measured: R = downstream / upstream rate in
sample units from busy time (runtime/throughput.py): fresh rows per busy second of the
preprocessing actors that worked in the window, summed; trained samples per train-step
second of the workers, summed. How often: every AUTO_UPDATE_S (0.5 s), on the heartbeat
after it, over the window since the last update (the first window opens after the first
step; one without reports from both sides stays open). Damping: the state is an
estimate of log R, never clipped (data/echo.py update_r_estimate): the mean of log R
over the first windows (the first sets it outright), then an exponential average with
gain 1/3; e = the estimate's R within [1, echo.max_factor] (auto_factor), so e falls
when R falls, and at R near the cap windows above it count as much as those below.
Where e is applied: the worker
takes it without waiting (train/worker_link.py live_factor) for each fresh batch it
takes from the stream (train/consumption_echo.py).

Faults: an epoch is final once a checkpoint covers it (Ray Train's controller says
so through `committed`), because a worker group that fails later restarts from that
checkpoint and replays the epochs after it; `attempt_started` then drops what the failed
attempt reported beyond the checkpoint, so nothing is counted twice. Rank 0's `finish`
does not make the epochs after the last checkpoint final: the worker can still die
before Ray Train sees its function return, and Ray Train then replays them from the
checkpoint (the target reached at epoch 3, the worker SIGKILLed during its `finish`:
the driver had kept the killed attempt's epoch 3, fresh 4389, while the replay trained
4383 distinct samples; tests/integration/test_worker_failure.py). They are final once
the fit has ended (`poll(..., ended=True)`). Errors that a
retry cannot fix (bad data) are recorded by `fatal` so the driver stops at once.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray

from echoray.data.echo import REstimate, auto_factor, update_r_estimate
from echoray.records import Heartbeat
from echoray.runtime.throughput import Throughput

# The window of echo.factor: auto's control law (the module docstring states the law).
# 0.5 s: two to four actor reports of 128 samples at R ~ 4 on digits, so one window is
# not noise alone, and e is set from R 0.5 s after the first step.
AUTO_UPDATE_S = 0.5
BAD_EXAMPLES_SHOWN = 5


@ray.remote(num_cpus=0, max_restarts=0)
class RunCollector:
    def __init__(self, factor: float | str = 1.0, max_factor: float = 8.0, *, checkpointed: bool = False,
                 n_train: int = 0, max_bad_fraction: float = 0.0, resume: dict[str, Any] | None = None):
        self.events: list[dict[str, Any]] = []  # every epoch event, in arrival order (replays too)
        self.by_epoch: dict[int, dict[str, Any]] = {}  # the current record of each epoch
        self.checkpointed = checkpointed
        self.commit: dict[str, Any] | None = None  # latest checkpoint Ray Train registered
        self.final_epoch = 0  # epochs up to here will not be replayed
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
        self.r_estimate: REstimate | None = None  # auto: the controller's state
        self._window = self.throughput.snapshot()
        self._window_at = time.time()
        self.recoveries: list[dict[str, Any]] = []
        self.failures: list[dict[str, Any]] = []
        self.fatal_error: dict[str, str] | None = None  # {"kind": "data" | "diverged", "message"}
        self.aborted: str | None = None  # the driver gave up: workers stop (see heartbeat)
        self.controller = None  # Ray Train's controller actor, so the driver can stop it
        self.n_train, self.max_bad_fraction = n_train, max_bad_fraction
        self.bad: dict[int, tuple[str, str]] = {}  # sample id -> (file, reason)
        self.seeded = bool(resume)
        self.attempts = 0  # worker groups started
        self.reads_at_first_step: int | None = None
        self.first_read_at: float | None = None
        self.workers: dict[int, Heartbeat] = {}  # rank -> its latest heartbeat
        if resume:  # a new driver continues a run: its checkpoint is the starting point
            self.commit = resume
            self.final_epoch = resume["epoch"]
            if self.auto and resume.get("echo_factor"):
                self.factor = float(resume["echo_factor"])
                # the saved factor weighs as one window: the first new one moves e half-way
                self.r_estimate = REstimate(float(np.log(self.factor)), 1)

    # --- from preprocessing actors ---
    def stage(self, name: str, actor: str, rows: int, busy_s: float, reads: int = 0) -> None:
        self.throughput.add_stage(name, actor, rows, busy_s)
        self.source_reads += reads
        if self.first_read_at is None and reads:
            self.first_read_at = time.time() - busy_s  # the read began busy_s before its report

    def stage_totals(self) -> dict[str, dict[str, float]]:
        """stage -> rows, busy seconds and reporting actors (echoray bench-input)."""
        return {name: {"rows": int(sum(t.rows for t in actors.values())),
                       "busy_s": sum(t.busy_s for t in actors.values()), "actors": len(actors)}
                for name, actors in self.throughput.stages.items()}

    def echo_factor(self) -> float:
        return self.factor

    def rows_ahead(self) -> int | None:
        """Fresh rows read but not yet trained (None until a worker group has started):
        what source.max_rows_ahead bounds."""
        if not self.attempts:
            return None
        return self.source_reads - sum(beat.fresh for beat in self.workers.values())

    def bad_images(self, items: list[tuple[int, str, str]]) -> dict[str, Any]:
        """Undecodable training files (id, file, reason): skipped while they stay within
        source.max_bad_fraction of the training split; beyond it the run fails naming them."""
        for sid, name, reason in items:
            self.bad.setdefault(int(sid), (name, reason))
        limit = int(self.max_bad_fraction * self.n_train)
        over = len(self.bad) > limit
        shown = [f"{n} ({r})" for n, r in list(self.bad.values())[:BAD_EXAMPLES_SHOWN]]
        message = (f"{len(self.bad)} undecodable training image(s), more than source.max_bad_fraction="
                   f"{self.max_bad_fraction:g} of {self.n_train} allows ({limit}): " + "; ".join(shown))
        if over:
            self.fatal(message, "data")
        return {"count": len(self.bad), "over": over, "message": message}

    def bad_ids(self) -> np.ndarray:
        return np.asarray(sorted(self.bad), dtype=np.int64)

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
            self.reads_at_first_step = self.source_reads  # the head start the pipeline had
        if self.recoveries and self.recoveries[-1]["first_step_at"] is None \
                and beat.steps > self.recoveries[-1]["steps"]:
            self.recoveries[-1]["first_step_at"] = now
        self.last_progress = now
        self.throughput.set_worker(beat.rank, beat.samples, beat.step_s)
        if self.auto and self.reads_at_first_step is not None and self._window_at < self.first_step_at:
            # the first window opens after the first step (its warm-up is not the step's rate)
            self._window, self._window_at = self.throughput.snapshot(), now
        elif self.auto and now - self._window_at >= AUTO_UPDATE_S:
            self._update_factor(now)
        return self.aborted is not None

    def _update_factor(self, now: float) -> None:
        recent = self.throughput.since(self._window)
        r = recent.measured_r()
        if r is not None:
            self.r_estimate = update_r_estimate(self.r_estimate, r)
            self.factor = auto_factor(self.r_estimate, self.max_factor)
            self.factor_history.append({"time": now, "factor": self.factor, "measured_R": r})
            self._window, self._window_at = self.throughput.snapshot(), now

    def event(self, record: dict[str, Any]) -> None:
        self.last_progress = time.time()
        self.events.append(record)
        self.by_epoch[record["epoch"]] = record
        if not self.checkpointed:
            self.final_epoch = max(self.final_epoch, record["epoch"])

    def add_audit(self, columns: dict[str, np.ndarray]) -> None:
        self.audit.append(columns)

    def attempt_started(self, epoch: int, steps: int) -> str | None:
        """Rank 0 of a worker group starts from the checkpoint of `epoch` (0: from scratch):
        forget what an earlier attempt reported after it. Returns the checkpoint the
        training stream was built for, which must be the one the workers restored."""
        self.attempts += 1
        self.last_progress = time.time()
        self.final = None  # a failed attempt's final record is not the run's
        for e in [e for e in self.by_epoch if e > epoch]:
            del self.by_epoch[e]
        self.audit = [{k: v[part["step"] < steps] for k, v in part.items()} for part in self.audit]
        # The first attempt of a run resumed by a new driver is the resume, not a failure.
        kind = "start" if self.attempts == 1 and not self.seeded else (
            "resume" if self.attempts == 1 else "restart")
        if kind != "start":
            self.recoveries.append({"kind": kind, "from_epoch": epoch, "steps": steps,
                                    "restored_at": time.time(), "first_step_at": None})
        return self.commit["checkpoint"].path if self.commit else None

    def finish(self, record: dict[str, Any]) -> None:
        """Rank 0's final record. Not the end of the attempt: see the module docstring."""
        self.final = record
        if not self.checkpointed:
            self.final_epoch = max([self.final_epoch, *self.by_epoch])

    def sync(self) -> bool:
        """A barrier: calls from one caller run in order, so earlier sends have landed."""
        return True

    # --- from Ray Train's controller (runtime/commit.py) ---
    def committed(self, checkpoint, metrics: dict[str, Any]) -> None:
        self.commit = {"checkpoint": checkpoint, **metrics}
        self.final_epoch = max(self.final_epoch, int(metrics["epoch"]))

    def failed(self, detected_at: float, errors: str) -> None:
        self.failures.append({"detected_at": detected_at, "errors": errors})

    def latest_checkpoint(self) -> dict[str, Any] | None:
        return self.commit

    def register_controller(self, handle) -> None:
        self.controller = handle

    def get_controller(self):
        return self.controller

    # --- for the driver ---
    def poll(self, since: int, factor_since: int = 0, final_since: int = 0, ended: bool = False) -> dict[str, Any]:
        """ended: the fit has returned (no worker group can replay an epoch any more)."""
        up, down = self.throughput.rates()
        if ended:
            self.final_epoch = max([self.final_epoch, *self.by_epoch])
        final = []
        e = final_since + 1
        while e <= self.final_epoch and e in self.by_epoch:  # in order, no gaps
            final.append(self.by_epoch[e])
            e += 1
        return {
            "events": self.events[since:],
            "final_events": final,
            "factor_history": self.factor_history[factor_since:],
            "last_progress": self.last_progress,
            "first_step_at": self.first_step_at,
            "reads_at_first_step": self.reads_at_first_step,
            "first_read_at": self.first_read_at,
            "source_reads": self.source_reads,
            "upstream_examples_per_s": up,
            "downstream_examples_per_s": down,
            "measured_R": down / up if up and down else None,
            "echo_factor": self.factor,
            "final": self.final,
            "fatal": self.fatal_error,
            "recoveries": self.recoveries,
            "failures": self.failures,
            "bad_examples": len(self.bad),
            "bad_files": [n for n, _ in list(self.bad.values())[:BAD_EXAMPLES_SHOWN]],
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
