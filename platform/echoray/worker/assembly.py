"""One way a worker is assembled, whatever hosts it: Ray Train (train/loop.py run_worker,
in a worker group or in local mode) and the tests and benchmarks (train/local_run.py
local_loop) each say only what differs — rank and world, device, the
collector link, the collectives, how the model is wrapped, what stops it — in a
`WorkerSite`; `build_loop` makes the WorkerLoop from it and `restore_and_keep` restores
the checkpoint it was handed and, where checkpoints are kept, attaches the Checkpointer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from echoray.config import PipelineConfig
from echoray.data.sources import SourceIndex
from echoray.train.groups import reading_ranks
from echoray.train.loop import WorkerEnv, WorkerLoop
from echoray.worker.link import Collectives
from echoray.worker.ports import CollectorPort, EvaluatorPort


@dataclass
class WorkerSite:
    """What the host of a worker supplies."""

    rank: int
    world: int
    device: torch.device | str
    link: CollectorPort
    comm: Collectives
    wrap_model: Callable[[torch.nn.Module], torch.nn.Module]  # DDP + device, or the identity
    should_stop: Callable[[], bool] | None = None  # checked before every step (driver/stop.py)


def build_loop(cfg: PipelineConfig, idx: SourceIndex, site: WorkerSite,
               evaluator: EvaluatorPort | None = None) -> WorkerLoop:
    """The WorkerLoop of this rank, not yet set up (setup() builds the model: a host may
    first check whether the run was aborted). evaluator: the held-out set (default: the
    source's, this rank's share of it)."""
    from echoray.train.lm_eval import make_evaluator

    if evaluator is None:
        evaluator = make_evaluator(cfg, idx, site.rank, site.world)
    env = WorkerEnv(site.rank, site.world, site.device, site.link, site.comm, site.wrap_model, evaluator,
                    should_stop=site.should_stop)
    return WorkerLoop(cfg, env, n_train=len(idx.train_ids), channels=idx.channels, num_classes=idx.num_classes,
                      image_size=idx.image_size)


def restore_and_keep(loop: WorkerLoop, cfg: PipelineConfig, idx: SourceIndex, checkpoint: Any, collector: Any,
                     keep: bool = True, sink: Callable[[dict, Any], None] | None = None) -> None:
    """After setup(): load `checkpoint` (None: from scratch; rank 0 tells the collector
    either way) into the loop, and with `keep` attach a Checkpointer that writes through
    `sink` (default: Ray Train's report)."""
    from echoray.recovery.faults import Checkpointer, restore_loop

    env = loop.env
    ba = cfg.batch_augmentation
    restored = restore_loop(checkpoint, env.link, env.rank, env.world, loop.model, loop.opt,
                            reading_ranks(env.world, ba.copies, ba.mode))
    loop.restore(restored)
    if keep:
        env.checkpointer = Checkpointer(cfg, idx, collector, env.rank, env.world, loop.consumed,
                                        restored.meta.first_open_pass if restored else 0, sink=sink)
