"""Which trials of a search can read one preprocessing stream: `group_trials`.

A trial's stream is decided by the config values upstream of its own stages: the
source (what is read and how it is split), the seed (the read plan's order and the
augmentation keys), the preprocessing batch and actors, and the augmentation when it
runs on the CPU actors. Everything else is the trial's own and does not split a
group: optimizer, schedule, model, the echo factor and stage (a shared stream is echoed
by each trial's worker, echo_plan.py `shared_stream`), the shuffle buffer, the batch
size, batch augmentation, preprocess.mean/std (normalised on the worker), the epochs
budget and the target. Pure: no Ray, no MLflow.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from echoray.config import PipelineConfig
from echoray.echo_plan import EchoPlan, shuffle_buffer_rows


def upstream_tree(cfg: PipelineConfig) -> dict[str, Any]:
    """The config values that decide a trial's preprocessed stream (module docstring)."""
    p = cfg.preprocess
    return {
        "seed": cfg.seed,
        "source": cfg.source.model_dump(mode="json"),
        "preprocess": {
            "batch_size": p.batch_size, "deterministic": p.deterministic,
            "actors": p.actors.model_dump(mode="json"),
            "augment": [op.model_dump(mode="json") for op in p.augment.ops] if p.augment.on == "cpu" else None,
        },
    }


def upstream_key(cfg: PipelineConfig) -> str:
    """A short digest of upstream_tree: equal keys, one stream."""
    text = json.dumps(upstream_tree(cfg), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def private_reason(cfg: PipelineConfig, warm: bool) -> str | None:
    """Why this trial keeps its own stream, or None when it can read a shared one."""
    if not cfg.search.share_preprocessing:
        return "search.share_preprocessing is false"
    if not warm:
        return "the trial is a Ray Train fit (search.warm_trials false, or not one CPU worker without restarts)"
    if not EchoPlan.from_config(cfg).shareable:
        return (f"echo.stage {cfg.echo.stage} at factor {cfg.echo.factor} with preprocess.augment.on "
                f"{cfg.preprocess.augment.on} echoes in the preprocessing actor or by its own upstream rate")
    return None


@dataclass(frozen=True)
class ShareGroup:
    """Trials that read one stream (`shared`), or one trial on its own stream and why."""

    name: str  # g0, g1, ... in the order of the groups' first trials
    key: str  # upstream_key of its trials
    trials: tuple[str, ...]  # trial keys, in search order
    reason: str | None = None  # None: shared; else why the trial keeps a private stream

    @property
    def shared(self) -> bool:
        return self.reason is None

    def describe(self) -> str:
        """The group as the search's MLflow parent run records it (a tag value)."""
        how = "shared stream" if self.shared else f"private stream ({self.reason})"
        return f"{how}; upstream key {self.key}; trials {','.join(self.trials)}"


def group_trials(configs: Mapping[str, PipelineConfig], warm: bool = True) -> list[ShareGroup]:
    """Trial key -> config, in search order, to its groups: one shared group per distinct
    upstream_key among the trials that can share, one private group per trial that
    cannot (private_reason). `warm`: the search trains its trials in their trial actors."""
    shared: dict[str, list[str]] = {}
    order: list[tuple[str, str, str | None]] = []  # (key, first trial, reason)
    for trial, cfg in configs.items():
        key, reason = upstream_key(cfg), private_reason(cfg, warm)
        if reason is not None:
            order.append((key, trial, reason))
        elif key in shared:
            shared[key].append(trial)
        else:
            shared[key] = [trial]
            order.append((key, trial, None))
    return [ShareGroup(f"g{i}", key, tuple(shared[key]) if reason is None else (first,), reason)
            for i, (key, first, reason) in enumerate(order)]


def stream_epochs(members: list[PipelineConfig], window_rows: int, n_train: int) -> int:
    """Plan epochs a group's stream holds: enough that every member gets its
    train.max_epochs worth of rows wherever it attaches. A member starts at or before
    the head, which is at most window_rows past where the earlier members ended, so the
    sum of the members' epochs plus the window (and one epoch a late start can straddle)
    is never short; the producer stops as soon as every member has detached."""
    return sum(c.train.max_epochs for c in members) + -(-window_rows // max(1, n_train)) + 1


def window_rows(members: list[PipelineConfig]) -> int:
    """Rows the window may hold between its slowest and fastest consumer: eight producer
    blocks (preprocess.batch_size rows each) or twice the largest member's shuffle pool,
    whichever is more, so no member's shuffle buffer or echo pool waits on the window."""
    block = members[0].preprocess.batch_size
    pools = [max(shuffle_buffer_rows(c) or 0, c.train.batch_size) for c in members]
    return max(8 * block, 2 * max(pools))
