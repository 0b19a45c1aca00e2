"""Worker-side building blocks for a `train_loop_per_worker` of your own (exported as
echoray.train.*): exact fresh-example counting, consumption-side echo, and grouped batch
augmentation (Hoffer et al. 2020, 4.5: M workers hold the same samples, member m makes view m).

    layout = echoray.train.group_layout(rank, world, copies=2)
    pg = echoray.train.member_group(world, copies=2)          # every rank, once
    fresh = echoray.train.FreshCounter()
    source = echoray.data.echo_batches(shard, 64) if layout.reads else None
    for batch in echoray.train.group_batches(source, layout, pg):
        keys = echoray.train.view_keys(seed, batch, layout)    # this member's view
        ...train on echoray.data.augment_images(batch["image"], keys, ops)...
        if layout.reads:
            fresh.update(batch)
    fresh.total()                                              # every rank: exact, all ranks

This module imports torch and Ray Train (it runs inside a worker); `import echoray.train`
imports nothing of it until a name is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from echoray.accounting.fresh import FreshTracker
from echoray.seeds import STREAM_AUGMENT, STREAM_SAMPLER, derive_seed, mix
from echoray.train.batch_augment import dropout_seed  # noqa: F401 - public
from echoray.train.consumption_echo import ConsumptionEcho, agree_min
from echoray.train.groups import (
    GroupedDataConfig,  # noqa: F401 - public
    rank_layout,
)
from echoray.train.groups import RankLayout as GroupLayout

Batch = dict[str, np.ndarray]


def _ids(batch: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    sample_id = np.asarray(batch["sample_id"], dtype=np.int64)
    epoch = np.asarray(batch["epoch"], dtype=np.int64) if "epoch" in batch else np.zeros_like(sample_id)
    return sample_id, epoch


class FreshCounter:
    """Fresh examples: the distinct (epoch, sample_id) pairs the train steps consumed, each
    counted at its first trained copy, exact across workers.

    update(batch) after each step with the batch trained (columns sample_id, optionally
    epoch and echo_copies, which echo adds: a row without it is its sample's only copy),
    on the worker that read the batch (grouped mode: the group's leader; the members train
    the same samples and do not count them). total() is a collective (every rank at the
    same point): it reconciles samples whose copies reached two ranks and returns the sum
    over all ranks. `local` is this rank's share."""

    def __init__(self, state: dict | None = None):
        self.tracker = FreshTracker.from_state(state["table"]) if state else FreshTracker()
        self.local = int(state["local"]) if state else 0

    def update(self, batch: Mapping[str, Any]) -> int:
        """Count one trained batch; returns how many of its samples were fresh."""
        sample_id, epoch = _ids(batch)
        copies = np.asarray(batch["echo_copies"]) if "echo_copies" in batch else np.ones_like(sample_id)
        fresh = self.tracker.observe(epoch, sample_id, copies)
        self.local += fresh
        return fresh

    def total(self, gather: Callable[[object], list] | None = None, rank: int | None = None) -> int:
        """The exact count over all ranks. gather(obj) -> every rank's obj, in rank order
        (default: torch.distributed.all_gather_object when a process group is up; else this
        process alone)."""
        gather, rank = _default_gather(gather, rank)
        if gather is None:
            return self.local
        self.local += self.tracker.reconcile(rank, gather)
        return int(sum(gather(self.local)))

    def state_dict(self) -> dict:
        """JSON-ready state for a checkpoint; FreshCounter(state) continues from it."""
        return {"local": self.local, "table": self.tracker.to_state()}


def _default_gather(gather, rank):
    if gather is not None:
        return gather, 0 if rank is None else rank
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return None, 0

    def all_gather(obj):
        out = [None] * dist.get_world_size()
        dist.all_gather_object(out, obj)
        return out

    return all_gather, dist.get_rank()


def echo_on_consumption(batches: Iterable[Mapping[str, np.ndarray]], factor: float | Callable[[], float], *,
                     batch_size: int, seed: int = 0, buffer_rows: int = 512, sampler_seed: int = 0,
                     gather: Callable[[object], list] | None = None) -> Iterator[Batch]:
    """Echo at consumption time: each fresh batch taken from `batches` is echoed with the
    factor of that moment (a number, or a callable read once per fresh batch, e.g. a live
    estimate of upstream / downstream throughput) into a pool of buffer_rows rows, from which
    batches of exactly batch_size rows are drawn at random (sampler_seed), copies of a sample
    kept apart where the pool allows. Rows get echo_copy and echo_copies (FreshCounter stays
    exact). Several data-parallel ranks: pass gather (as FreshCounter.total) so all ranks
    stop after the same number of batches."""
    factor_fn = factor if callable(factor) else (lambda: float(factor))
    stage = ConsumptionEcho(seed, batch_size, buffer_rows, factor_fn, sampler_seed,
                            agree=agree_min(gather) if gather is not None else None)

    def fresh_rows() -> Iterator[Batch]:
        for b in batches:
            sample_id, epoch = _ids(b)
            yield {**{k: np.asarray(v) for k, v in b.items()}, "sample_id": sample_id, "epoch": epoch,
                   "echo_copy": np.zeros_like(sample_id)}  # the rows are fresh: copy 0

    return stage.batches(fresh_rows())


def group_layout(rank: int, world: int, copies: int) -> GroupLayout:
    """Where a rank stands in grouped batch augmentation: world/copies groups of `copies`
    consecutive ranks; .group, .member (its view), .leader (the rank that reads), .reads,
    .readers (how many shards the data is split into: use GroupedDataConfig)."""
    return rank_layout(rank, world, copies, "grouped")


def sampling_seed(seed: int, group: int) -> int:
    """The shuffle seed a group shares (every member samples the same order)."""
    return derive_seed(seed, STREAM_SAMPLER, group)


def view_keys(seed: int, batch: Mapping[str, np.ndarray], layout: GroupLayout, per_copy: bool = False) -> np.ndarray:
    """This member's augmentation keys (uint64, one per row): view v = layout.member of each
    (epoch, sample_id), the keys echoray's own batch augmentation uses; per_copy: echo copies
    of a sample get different augmentations (echo before augmentation)."""
    sample_id, epoch = _ids(batch)
    copy = np.asarray(batch["echo_copy"], dtype=np.int64) if per_copy else np.zeros_like(sample_id)
    return mix(seed, STREAM_AUGMENT, epoch, sample_id, copy, 0, layout.member)


def member_group(world: int, copies: int):
    """This rank's gloo process group (its group's `copies` ranks). A collective: every rank
    calls it once, after torch.distributed is up (inside a TorchTrainer's loop)."""
    import torch.distributed as dist

    from echoray.train.groups import make_groups

    return make_groups(world, copies)[dist.get_rank() // copies]


def group_batches(source: Iterable[Mapping[str, Any]] | None, layout: GroupLayout, pg) -> Iterator[dict]:
    """The leader's batches on every member of its group, in the same order: the leader
    passes its iterator, the others None. Any picklable batch (torch.distributed
    broadcast_object_list); ends on every member when the leader's source ends."""
    import torch.distributed as dist

    it = iter(source) if layout.reads and source is not None else None
    while True:
        box = [next(it, None) if it is not None else None]
        dist.broadcast_object_list(box, src=layout.leader, group=pg)
        if box[0] is None:
            return
        yield box[0]

