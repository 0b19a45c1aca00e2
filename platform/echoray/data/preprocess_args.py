"""What a preprocessing actor (data/stages.py Preprocess) is made with, as one record.

`preprocess_args` derives it from the config in one place, for the Ray Data stage
(data/pipeline.py) and for its in-process twin (train/local_run.py) alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from echoray.config import AugmentOp, PipelineConfig
from echoray.data.sources.base import SourceIndex
from echoray.echo_plan import EchoPlan


@dataclass(frozen=True)
class PreprocessArgs:
    """The actor's constructor argument. The echo fields say what the actor itself
    repeats: nothing where the run echoes on the worker or not at all."""

    idx: SourceIndex
    chunk_size: int  # source.chunk_size: samples per read-plan chunk
    ops: list[AugmentOp] | None  # the augmentation the actor applies; None: none in the actor
    seed: int
    echo_before_augment: bool = False  # echo each row, then augment every copy
    echo_after_augment: bool = False  # augment, then echo
    echo_factor: float | str = 1.0  # the factor of the actor's echo ("auto": the collector's)
    collector: Any = None  # the run's RunCollector handle; None: no reports (in process)
    consumed: dict[int, np.ndarray] | None = None  # a restored run: rows its steps already took


def preprocess_args(cfg: PipelineConfig, idx: SourceIndex, collector: Any = None,
                    consumed: dict[int, np.ndarray] | None = None) -> PreprocessArgs:
    """The actor's record for this config: augmentation only when preprocess.augment.on is
    cpu, the echo only where the echo plan puts it in the actor."""
    plan = EchoPlan.from_config(cfg)
    aug = cfg.preprocess.augment
    return PreprocessArgs(
        idx=idx, chunk_size=cfg.source.chunk_size,
        ops=aug.ops if aug.on == "cpu" else None, seed=cfg.seed,
        echo_before_augment=plan.in_actor_before_augment, echo_after_augment=plan.in_actor_after_augment,
        echo_factor=plan.actor_factor, collector=collector, consumed=consumed or None,
    )
