"""Everything the worker loop counts, in one object that alone writes and reads its
checkpoint form, so a counter cannot be saved and not restored (or the reverse).

Two scopes, one per field (dataclass metadata):
- "run":  the same on every rank (decided together at an evaluation); rank 0 writes it
          into meta.json, every rank reads it back.
- "rank": this worker's own counts; each rank writes and reads rank_<r>.json.
The loss accumulator is not here: it lives on the device (train/device.py) and is
reset at every evaluation, which is where checkpoints are taken.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from echoray.accounting.counters import Counters
from echoray.accounting.fresh import FreshTracker
from echoray.records import EpochRecord

RUN, RANK = "run", "rank"


def _f(default=None, scope: str = RANK, factory=None, key: str | None = None, since_v2: bool = False):
    """A field of `scope`, saved under `key` (default: its name). since_v2: a field that
    checkpoints of earlier versions lack; restored as its default there."""
    meta = {"scope": scope, "key": key, "optional": since_v2}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _key(f) -> str:
    return f.metadata["key"] or f.name


@dataclass
class LoopState:
    # decided together at evaluations ("run")
    evals: int = _f(0, RUN, key="epoch")  # evaluations done (an epoch record's "epoch" is their index)
    best: float = _f(0.0, RUN)
    acc: float = _f(math.nan, RUN)
    to_target: EpochRecord | None = _f(None, RUN)  # the evaluation that reached the target
    reason: str = _f("max_epochs of data consumed", RUN)
    eval_step: int = _f(0, RUN)  # counters.steps at the last evaluation
    eval_s: float = _f(0.0, RUN)
    elapsed_s: float = _f(0.0, RUN)  # wall time of earlier attempts (as of the checkpoint)
    train_s: float = _f(0.0, RUN)  # time since the first batch, over earlier attempts
    # [step, schedule epochs(, measured steps per epoch)] where the schedule last started: the
    # run's start, a resume with another worker count, an evaluation under auto
    # (train/schedule_position.py): the learning-rate schedule follows the data consumed
    lr_from: list = _f(scope=RUN, factory=lambda: [0, 0.0], since_v2=True)
    # this worker's ("rank")
    counters: Counters = _f(scope=RANK, factory=Counters)
    fresh: FreshTracker = _f(scope=RANK, factory=FreshTracker)  # samples with copies in flight
    dup_batches: int = _f(0)  # batches holding two copies of one sample
    batches: int = _f(0)
    batch_index: int = _f(0)  # batches drawn so far: the key of batch echo's repeat draw
    next_rep: int = _f(0)  # a batch cut short by a checkpoint: its next repeat ...
    reps: int = _f(0)  # ... of this many (its arrays are the checkpoint's pending batch)
    amp_scaler: dict = _f(scope=RANK, factory=dict)  # fp16's GradScaler state (scale, growth tracker)

    def to_checkpoint(self, **now: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """(run part for meta.json, rank part for rank_<r>.json); `now` overrides fields
        whose current value is a clock reading (elapsed_s, train_s) or the pending batch."""
        parts: dict[str, dict[str, Any]] = {RUN: {}, RANK: {}}
        for f in dataclasses.fields(self):
            value = now[f.name] if f.name in now else getattr(self, f.name)
            parts[f.metadata["scope"]][_key(f)] = _encode(value)
        unknown = set(now) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise KeyError(f"not loop state fields: {sorted(unknown)}")
        return parts[RUN], parts[RANK]

    @classmethod
    def from_checkpoint(cls, run: dict[str, Any], rank: dict[str, Any]) -> LoopState:
        """The inverse of to_checkpoint; a field missing from the checkpoint is an error."""
        values = {}
        for f in dataclasses.fields(cls):
            part = run if f.metadata["scope"] == RUN else rank
            if _key(f) not in part and f.metadata["optional"]:
                continue
            if _key(f) not in part:
                raise KeyError(f"checkpoint lacks loop state field {_key(f)!r} ({f.metadata['scope']} part)")
            values[f.name] = part[_key(f)]
        values["counters"] = Counters(**values["counters"])
        values["fresh"] = FreshTracker.from_state(values["fresh"])
        if values["to_target"] is not None:
            values["to_target"] = EpochRecord.from_dict(values["to_target"])
        return cls(**values)


def _encode(value: Any) -> Any:
    if isinstance(value, Counters):
        return dataclasses.asdict(value)
    if isinstance(value, FreshTracker):
        return value.to_state()
    if isinstance(value, EpochRecord):
        return value.to_dict()
    return value
