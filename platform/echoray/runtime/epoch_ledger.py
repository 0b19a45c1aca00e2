"""Which evaluation records are final: the driver logs an evaluation once, and only one no
worker group can replay any more. ("epoch" here, as in the records' dict keys, is an
evaluation's index: records.py; an epoch in the user's sense is a pass of fresh data,
echoray/epochs.py.)

An epoch is final once a checkpoint covers it (Ray Train's controller says so through
`committed`), because a worker group that fails later restarts from that checkpoint and
replays the epochs after it; `restart_from` then drops what the failed attempt reported
beyond the checkpoint, so nothing is counted twice. Rank 0's `finish` does not make the
epochs after the last checkpoint final: the worker can still die before Ray Train sees
its function return, and Ray Train then replays them from the checkpoint (the target
reached at epoch 3, the worker SIGKILLed during its `finish`: the driver had kept the
killed attempt's epoch 3, fresh 4389, while the replay trained 4383 distinct samples;
tests/integration/test_worker_failure.py). They are final once the fit has ended
(`final_after(..., ended=True)`). Without checkpoints nothing is replayed: every record is
final when it arrives. Pure: the collector actor only hosts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class EpochLedger:
    checkpointed: bool = False  # epochs are final only once a checkpoint covers them
    events: list[dict[str, Any]] = field(default_factory=list)  # every epoch record, in arrival order (replays too)
    by_epoch: dict[int, dict[str, Any]] = field(default_factory=dict)  # the current record of each epoch
    commit: dict[str, Any] | None = None  # the latest checkpoint registered, with its metrics
    final_epoch: int = 0  # epochs up to here will not be replayed
    final: dict[str, Any] | None = None  # rank 0's final record of the current attempt

    @classmethod
    def resumed(cls, checkpointed: bool, resume: dict[str, Any] | None) -> EpochLedger:
        """A new driver continuing a run: its checkpoint (a commit record) is the start."""
        ledger = cls(checkpointed)
        if resume:
            ledger.commit, ledger.final_epoch = resume, int(resume["epoch"])
        return ledger

    def add(self, record: dict[str, Any]) -> None:
        self.events.append(record)
        self.by_epoch[record["epoch"]] = record
        if not self.checkpointed:
            self.final_epoch = max(self.final_epoch, record["epoch"])

    def restart_from(self, epoch: int) -> str | None:
        """A worker group starts from the checkpoint of `epoch` (0: from scratch): forget
        what an earlier attempt reported after it. Returns the registered checkpoint's
        path (None without one)."""
        self.final = None  # a failed attempt's final record is not the run's
        for e in [e for e in self.by_epoch if e > epoch]:
            del self.by_epoch[e]
        return self.commit["checkpoint"].path if self.commit else None

    def finish(self, record: dict[str, Any]) -> None:
        """Rank 0's final record; not the end of the attempt (see the module docstring)."""
        self.final = record
        if not self.checkpointed:
            self.final_epoch = max([self.final_epoch, *self.by_epoch])

    def committed(self, checkpoint: Any, metrics: dict[str, Any]) -> None:
        self.commit = {"checkpoint": checkpoint, **metrics}
        self.final_epoch = max(self.final_epoch, int(metrics["epoch"]))

    def final_after(self, since: int, ended: bool = False) -> list[dict[str, Any]]:
        """The final records after epoch `since`, in order and without gaps. ended: the fit
        has returned, so no worker group can replay an epoch any more."""
        if ended:
            self.final_epoch = max([self.final_epoch, *self.by_epoch])
        out, e = [], since + 1
        while e <= self.final_epoch and e in self.by_epoch:
            out.append(self.by_epoch[e])
            e += 1
        return out
