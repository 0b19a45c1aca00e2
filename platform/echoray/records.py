"""The records that cross a process boundary between the worker loop, the run's collector
and the checkpoints, as typed dataclasses read by attribute.

Contract: each record is built once, where it is decided, and read by attribute; only
at the edge of a process it becomes a dict (`to_dict`: what a JSON file, MLflow or the
driver holds, so epoch and final records reach the collector, the driver and MLflow as
dicts; `from_dict`: its inverse, which also reads the files earlier versions wrote:
the keys are the same). `from_dict(r.to_dict()) == r` for every record here
(tests/unit/test_records.py).

- Heartbeat: a worker's progress, every HEARTBEAT_S (train/loop_report.py -> runtime/collector.py);
  it travels as itself (both ends are ours and read it by attribute).
- EpochRecord: one evaluation (with train.evals_per_epoch k there are k per epoch, a pass
  of fresh data: echoray/epochs.py); its dict is what MLflow logs and the checkpoints
  keep as history.
- FinalRecord: rank 0's counts at the end of an attempt (the run summary's source).
- CheckpointMeta: a checkpoint's meta.json (recovery/faults.py writes it, everything that
  restores or resumes reads it).
- PendingBatch: a batch whose batch-echo repeats a checkpoint cut short.

Names say what they count where the dict keys, kept for the checkpoints and the
driver, do not: "epoch" in an evaluation record and a checkpoint's "epoch" are the
evaluation's index / evaluations done (`eval_index`, `evals`), a checkpoint's
"start_epoch" is a read-plan pass (`first_open_pass`). Epochs in the user's sense
(passes of fresh data, fractional) are an evaluation record's `data_epochs` and the
final record's `epochs`; what users read (console, summary.json, MLflow) calls the
index an evaluation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Heartbeat:
    """A worker's counters since the run began, sent without waiting for a reply."""

    rank: int
    steps: int
    samples: int  # trained samples (Counters.samples: a sample's batch-augmentation views once)
    step_s: float  # time inside train steps
    fresh: int = 0  # fresh examples this worker counted (exact once reconciled at an evaluation)
    wait_s: float = 0.0  # time waiting for the stream (its start-up excluded): `auto` reads starvation from it


@dataclass
class EpochRecord:
    """One evaluation. `scores` are the evaluator's metrics by name (`accuracy`, or a
    language model's `eval_loss`, `perplexity` and `bits_per_byte`); the dict form puts
    them at the top level after `step`, as MLflow and the run summary read them.

    The record grew keys over time (`metric`, `data_epochs`, `trained_samples`, ...), and
    a checkpoint keeps the records of its run as they were written: `from_dict` reads one
    that lacks a key as None and notes the key in `absent`, and `to_dict` leaves it out
    again, so a resumed run hands the driver its old records unchanged."""

    eval_index: int  # key "epoch": 1-based, train.evals_per_epoch of them per epoch
    data_epochs: float  # epochs (passes of fresh data) trained: fresh_examples / n_train
    step: int  # optimizer steps so far
    scores: dict[str, float]
    metric: float  # scores[train.metric]
    loss: float  # mean training loss since the previous evaluation
    lr: float
    accuracy_tta: float | None  # test-time augmentation (batch_augmentation.tta_views), else None
    fresh_examples: int  # distinct (epoch, sample) trained, all workers
    trained_examples: int  # rows the optimizer saw (echoes and views included)
    trained_samples: int  # the same in sample units (a sample's views once)
    duplicate_batch_fraction: float
    elapsed_s: float
    time: float
    train_s: float
    wait_fraction: float
    fresh_tokens: int | None = None  # text: fresh_examples x source.seq_len (predicted tokens)
    absent: frozenset[str] = frozenset()  # keys an older record lacked (see above)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"epoch": self.eval_index}
        for key in _KEYS_BEFORE_SCORES[1:]:
            if key not in self.absent:
                d[key] = getattr(self, key)
        d.update(self.scores)
        for key in _KEYS_AFTER_SCORES:
            if key not in self.absent and not (key == "fresh_tokens" and self.fresh_tokens is None):
                d[key] = getattr(self, key)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EpochRecord:
        """The record of `d` (KeyError without "epoch"); keys it does not name are scores."""
        named = {*_KEYS_BEFORE_SCORES, *_KEYS_AFTER_SCORES}
        if "epoch" not in d:
            raise KeyError(f"an epoch record needs its 'epoch' (the evaluation's index): {sorted(d)}")
        absent = frozenset(named - set(d) - {"fresh_tokens"})
        return cls(eval_index=d["epoch"], scores={k: v for k, v in d.items() if k not in named},
                   **{k: None for k in absent},
                   **{k: v for k, v in d.items() if k in named and k != "epoch"}, absent=absent)


# The dict order of an epoch record around its scores (the order it always had).
_KEYS_BEFORE_SCORES = ("epoch", "data_epochs", "step")
_KEYS_AFTER_SCORES = ("metric", "loss", "lr", "accuracy_tta", "fresh_examples", "trained_examples",
                      "trained_samples", "fresh_tokens", "duplicate_batch_fraction", "elapsed_s", "time",
                      "train_s", "wait_fraction")


@dataclass
class FinalRecord:
    """Rank 0's record at the end of an attempt (all ranks' counts summed)."""

    evals: int  # key "evaluations": evaluations done
    epochs: float  # passes of fresh data trained: fresh_examples / n_train (echoray/epochs.py)
    steps: int
    fresh_examples: int
    trained_examples: int  # rows (views)
    trained_samples: int  # samples
    best_accuracy: float | None  # train.metric accuracy only, else None
    last_accuracy: float | None
    best_metric: float
    last_metric: float
    to_target: EpochRecord | None  # the evaluation that reached train.target
    stop_reason: str
    world_size: int
    wait_s: float
    step_s: float
    device: str
    duplicate_batch_fraction: float
    loop_s: float
    eval_s: float
    precision: str
    peak_device_bytes: int | None  # CUDA only
    extra_copies: int = 0  # samples trained as spare copies under auto (absent from older records)

    def to_dict(self) -> dict[str, Any]:
        d = {("evaluations" if f.name == "evals" else f.name): getattr(self, f.name)
             for f in dataclasses.fields(self)}
        d["to_target"] = self.to_target.to_dict() if self.to_target is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FinalRecord:
        values = {("evals" if k == "evaluations" else k): v for k, v in d.items()}
        hit = values["to_target"]
        return cls(**{**values, "to_target": EpochRecord.from_dict(hit) if hit is not None else None})


@dataclass
class CheckpointMeta:
    """meta.json of a checkpoint (rank 0 writes it)."""

    evals: int  # key "epoch": evaluations done
    steps: int
    first_open_pass: int  # key "start_epoch": the first read-plan pass not wholly consumed (replayed)
    world_size: int
    state: dict[str, Any]  # LoopState's run part (accounting/loop_state.py owns its form)
    history: list[EpochRecord] = field(default_factory=list)  # rank 0's records so far
    saved_at: float | None = None
    echo_factor: float | None = None  # the collector's live factor (echo.factor: auto)

    def to_dict(self) -> dict[str, Any]:
        return {"epoch": self.evals, "steps": self.steps, "start_epoch": self.first_open_pass,
                "world_size": self.world_size, "state": self.state,
                "history": [r.to_dict() for r in self.history], "saved_at": self.saved_at,
                "echo_factor": self.echo_factor}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CheckpointMeta:
        return cls(evals=int(d["epoch"]), steps=int(d["steps"]), first_open_pass=int(d["start_epoch"]),
                   world_size=int(d["world_size"]), state=d["state"],
                   history=[EpochRecord.from_dict(r) for r in d.get("history", [])],
                   saved_at=d.get("saved_at"), echo_factor=d.get("echo_factor"))


@dataclass
class PendingBatch:
    """A batch cut short by a checkpoint: repeats `next_repeat`..`repeats - 1` are still
    to train (batch echo)."""

    batch: dict[str, np.ndarray]
    next_repeat: int
    repeats: int
