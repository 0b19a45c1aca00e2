"""The worker loop in one process without Ray: the same preprocessing (data/stages.py)
over the same read plan, a seeded shuffle buffer, a WorkerLoop with an in-process
collector. For unit tests of the loop's decisions and for benchmarks of its overhead
(data made once, then held in memory); `echoray train` never uses it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from echoray.config import PipelineConfig
from echoray.data.plan import chunks_per_call, plan_chunks, read_plan
from echoray.data.preprocess_args import preprocess_args
from echoray.data.sources import SourceIndex
from echoray.data.stages import Preprocess
from echoray.records import Heartbeat
from echoray.worker.link import Collectives, LocalLink


class LocalCollector:
    """What RunCollector receives from workers, kept in lists (runtime/collector.py)."""

    def __init__(self, factor: float = 1.0):
        self.factor = factor
        self.beats: list[Heartbeat] = []
        self.events: list[dict[str, Any]] = []
        self.audit: list[dict[str, np.ndarray]] = []
        self.final: dict[str, Any] | None = None
        self.aborted = False

    def heartbeat(self, beat: Heartbeat) -> bool:
        self.beats.append(beat)
        return self.aborted

    def event(self, record: dict[str, Any]) -> None:
        self.events.append(record)

    def add_audit(self, rows: dict[str, np.ndarray]) -> None:
        self.audit.append(rows)

    def finish(self, record: dict[str, Any]) -> None:
        self.final = record

    def sync(self) -> bool:
        return True

    def echo_factor(self) -> float:
        return self.factor

    def audit_columns(self) -> dict[str, np.ndarray]:
        return {k: np.concatenate([p[k] for p in self.audit]) for k in self.audit[0]}


def preprocessed_blocks(cfg: PipelineConfig, idx: SourceIndex, first_epoch: int = 0,
                        consumed: dict[int, np.ndarray] | None = None) -> Iterator[dict[str, np.ndarray]]:
    """The rows the Ray Data stage would emit, block by block, in read-plan order."""
    stage = Preprocess(preprocess_args(cfg, idx, consumed=consumed))
    per_call = chunks_per_call(cfg)
    for plan in read_plan(cfg.seed, cfg.train.max_epochs, plan_chunks(idx, cfg.source.chunk_size),
                          first_epoch=first_epoch):
        for start in range(0, len(plan["chunk"]), per_call):  # one actor call's rows at a time
            yield from stage({k: v[start : start + per_call] for k, v in plan.items()})


def local_loop(cfg: PipelineConfig, idx: SourceIndex, collector: LocalCollector | None = None,
               comm: Collectives | None = None, rank: int = 0, world: int = 1, evaluator=None,
               checkpointer=None, device: str = "cpu"):
    """A set-up WorkerLoop in this process (the model is moved to `device`, no DDP)."""
    from echoray.worker.assembly import WorkerSite, build_loop

    dev = torch.device(device)
    site = WorkerSite(rank, world, dev, LocalLink(collector or LocalCollector()), comm or Collectives.single(),
                      lambda m: m.to(dev))
    loop = build_loop(cfg, idx, site, evaluator)
    loop.env.checkpointer = checkpointer
    loop.setup()
    return loop
