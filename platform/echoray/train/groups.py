"""Grouped batch augmentation across workers: W workers form W/M groups of M.

Ray Train normally gives each worker its own shard. In grouped mode the training
stream is split into W/M shards instead; the first worker of each group reads its
group's shard (one read per sample per group) and broadcasts every batch to the
other M-1 workers over a gloo sub-group, so all M see the same samples in the same
order while each applies its own augmentation seed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

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
        splits = ds.streaming_split(world_size // self.copies, equal=True)
        for rank in range(world_size):
            out[rank]["train"] = splits[rank // self.copies]  # only the group's first worker iterates it
        return out


def make_groups(world: int, copies: int) -> list:
    """One gloo process group per worker group; every rank must create all of them."""
    return [dist.new_group(list(range(g * copies, (g + 1) * copies)), backend="gloo")
            for g in range(world // copies)]


def broadcast_batches(source: Iterable[dict] | None, pg, leader: int, shape: tuple[int, ...],
                      batch_size: int) -> Iterator[dict[str, np.ndarray]]:
    """The leader sends each batch of `source`; the others receive identical batches."""
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
        ints = torch.empty((len(INT_FIELDS), batch_size), dtype=torch.int64)
        images = torch.empty((batch_size, *shape), dtype=torch.uint8)
        if batch is not None:
            ints = torch.from_numpy(np.stack([np.asarray(batch[f], dtype=np.int64) for f in INT_FIELDS]))
            images = torch.from_numpy(np.ascontiguousarray(batch["image"]))
        dist.broadcast(ints, src=leader, group=pg)
        dist.broadcast(images, src=leader, group=pg)
        yield {**{f: ints[i].numpy() for i, f in enumerate(INT_FIELDS)}, "image": images.numpy()}
