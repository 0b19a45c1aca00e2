"""Grouped batch augmentation across workers: W workers form W/M groups of M.

Ray Train normally gives each worker its own shard. In grouped mode the training
stream is split into W/M shards instead; the first worker of each group reads its
group's shard (one read per sample per group) and broadcasts every batch to the
other M-1 workers over a gloo sub-group, so all M see the same samples in the same
order while each applies its own augmentation seed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
from ray.train import DataConfig

INT_FIELDS = ("epoch", "sample_id", "label", "echo_copy", "echo_copies", "aug_key")


class GroupedDataConfig(DataConfig):
    """Splits the "train" dataset into one shard per group of `copies` workers."""

    def __init__(self, copies: int, execution_options=None):
        super().__init__(datasets_to_split=[], execution_options=execution_options)
        self.copies = copies

    def configure(self, datasets, world_size, worker_handles, worker_node_ids, **kwargs):
        out = super().configure(datasets, world_size, worker_handles, worker_node_ids, **kwargs)
        ds = datasets["train"].copy(datasets["train"])
        ds.context.execution_options = self._resolve_execution_options("train")  # meant for subclasses
        shards = shard_map(world_size, self.copies, "grouped")
        splits = ds.streaming_split(max(shards) + 1, equal=True)
        for rank in range(world_size):
            out[rank]["train"] = splits[shards[rank]]  # only the group's first worker iterates it
        return out


@dataclass(frozen=True)
class RankLayout:
    """Where one worker stands in batch augmentation (pure: the same on every rank)."""

    group: int  # index of the worker's group (its rank in `local` mode)
    member: int  # index inside the group (0 in `local` mode)
    leader: int  # the rank that reads the group's shard
    readers: int  # shards the training stream is split into (groups)

    @property
    def reads(self) -> bool:
        return self.member == 0


def rank_layout(rank: int, world: int, copies: int, mode: str) -> RankLayout:
    if mode == "grouped":
        if world % copies:
            raise ValueError(f"scaling.num_workers={world} is not a multiple of batch_augmentation.copies={copies}")
        return RankLayout(rank // copies, rank % copies, rank - rank % copies, world // copies)
    return RankLayout(rank, 0, rank, world)


def shard_map(world: int, copies: int, mode: str) -> list[int]:
    """The training shard each rank is handed, by rank."""
    return [rank_layout(r, world, copies, mode).group for r in range(world)]


def reading_ranks(world: int, copies: int, mode: str) -> list[bool]:
    """Whether each rank reads the training stream, by rank (rank 0 always does)."""
    return [rank_layout(r, world, copies, mode).reads for r in range(world)]


def make_groups(world: int, copies: int) -> list:
    """One gloo process group per worker group; every rank must create all of them."""
    return [dist.new_group(list(range(g * copies, (g + 1) * copies)), backend="gloo")
            for g in range(world // copies)]


def broadcast_batches(source: Iterable[dict] | None, pg, leader: int, shape: tuple[int, ...],
                      batch_size: int, field: str = "image", dtype=torch.uint8,
                      int_fields: tuple[str, ...] = INT_FIELDS) -> Iterator[dict[str, np.ndarray]]:
    """The leader sends each batch of `source`; the others receive identical batches
    (`field`: the sample array, `shape` per row; a language model's is "tokens", int32)."""
    it = iter(source) if source is not None else None
    while True:
        flag = torch.zeros(1, dtype=torch.int64)
        batch = None
        if it is not None:
            batch = next(it, None)
            flag[0] = int(batch is not None)
        dist.broadcast(flag, src=leader, group=pg)
        if not flag.item():
            return
        ints = torch.empty((len(int_fields), batch_size), dtype=torch.int64)
        images = torch.empty((batch_size, *shape), dtype=dtype)
        if batch is not None:
            ints = torch.from_numpy(np.stack([np.asarray(batch[f], dtype=np.int64) for f in int_fields]))
            images = torch.from_numpy(np.ascontiguousarray(batch[field])).to(dtype)
        dist.broadcast(ints, src=leader, group=pg)
        dist.broadcast(images, src=leader, group=pg)
        yield {**{f: ints[i].numpy() for i, f in enumerate(int_fields)}, field: images.numpy()}
