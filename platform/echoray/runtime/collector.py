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
Its calls come in four parts, one file each, over the state each part owns:
runtime/collector_intake.py (from preprocessing actors), collector_liveness.py (progress,
heartbeats, the fatal error and the abort flag), collector_attempts.py (worker groups,
their records, the audit rows, recoveries) and collector_controller.py (from Ray Train's
controller). What is left here is building them and the driver's `poll`. Errors that a
retry cannot fix (bad data) are recorded by `fatal` so the driver stops at once.
"""

from __future__ import annotations

from typing import Any

import ray

from echoray.runtime.collector_attempts import WorkerAttempts
from echoray.runtime.collector_controller import ControllerLink
from echoray.runtime.collector_intake import ActorIntake
from echoray.runtime.collector_liveness import RunLiveness


@ray.remote(num_cpus=0, max_restarts=0)
class RunCollector(ActorIntake, RunLiveness, WorkerAttempts, ControllerLink):
    def __init__(self, factor: float | str = 1.0, max_factor: float = 8.0, *, checkpointed: bool = False,
                 n_train: int = 0, max_bad_fraction: float = 0.0, resume: dict[str, Any] | None = None,
                 start_factor: float | None = None):
        self._init_attempts(checkpointed, resume)
        self._init_intake(factor, max_factor, n_train, max_bad_fraction,
                          resume.get("echo_factor") if resume else None, start_factor)
        self._init_liveness()
        self._init_controller()

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
