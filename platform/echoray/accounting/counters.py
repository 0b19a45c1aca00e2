"""Fresh/trained example counters and the audit rows they are checked against."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

AUDIT_COLUMNS = ("epoch", "step", "worker", "group", "sample_id", "view", "ba_view", "aug_key")


@dataclass
class Counters:
    """Per-worker counts since the run began."""

    fresh: int = 0  # first copies of source reads consumed by a step
    trained: int = 0  # examples (rows) the optimizer saw: echoes and batch-augmentation views included
    samples: int = 0  # the same in sample units: a sample's M views count once (once per group in grouped mode)
    steps: int = 0
    wait_s: float = 0.0  # time the step waited for its input
    step_s: float = 0.0  # time inside the train step
    extra: int = 0  # samples trained as extra copies instead of waiting (under auto)

    def add_step(self, fresh: int, trained: int, wait_s: float, step_s: float, samples: int | None = None) -> None:
        self.fresh += fresh
        self.trained += trained
        self.samples += trained if samples is None else samples
        self.steps += 1
        self.wait_s += wait_s
        self.step_s += step_s


@dataclass
class AuditBuffer:
    """Rows of (epoch, step, worker, group, sample_id, view, ba_view, aug_key) per consumed example.

    Rows drained since the last checkpoint are also kept for it (recovery/checkpoint.py), so
    a run resumed by a new driver still writes the audit of the whole run."""

    enabled: bool
    parts: dict[str, list[np.ndarray]] = field(default_factory=lambda: {c: [] for c in AUDIT_COLUMNS})
    since_checkpoint: list[dict[str, np.ndarray]] = field(default_factory=list)

    def add(self, **columns: np.ndarray) -> None:
        if not self.enabled:
            return
        n = len(columns["sample_id"])
        for c in AUDIT_COLUMNS:
            self.parts[c].append(np.broadcast_to(np.asarray(columns[c], dtype=np.int64), (n,)).copy())

    def drain(self) -> dict[str, np.ndarray] | None:
        if not self.enabled or not self.parts["sample_id"]:
            return None
        out = {c: np.concatenate(v) for c, v in self.parts.items()}
        self.parts = {c: [] for c in AUDIT_COLUMNS}
        self.since_checkpoint.append(out)
        return out

    def take_for_checkpoint(self) -> dict[str, np.ndarray] | None:
        if not self.since_checkpoint:
            return None
        out = {c: np.concatenate([p[c] for p in self.since_checkpoint]) for c in AUDIT_COLUMNS}
        self.since_checkpoint = []
        return out
