"""The input side of the worker loop (train/loop.py): from the stream's rows to the step's
tensors. Exact batches (or consumption echo's), the grouped broadcast, a batch a
checkpoint cut short first, the inputs made ahead of the step on a thread
(train/prefetch.py), the rows logged consumed, and what a checkpoint keeps of the rows
taken and not trained. It reads the loop's config, layout and state and keeps only what
is its own: the consumption-echo stage and the prefetch in flight."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch

from echoray.data.batching import pack_unique, sample_keys
from echoray.echo_plan import shuffle_buffer_rows
from echoray.seeds import STREAM_SAMPLER, derive_seed
from echoray.train.batch_augment import worker_views
from echoray.train.consumption_echo import ConsumptionEcho, SpareCopies, agree_min
from echoray.train.prefetch import Prefetch


def has_duplicates(batch: dict[str, np.ndarray]) -> bool:
    """Two copies of one (epoch, sample) in one batch: what the shuffle buffer should prevent."""
    pairs = sample_keys(batch["epoch"], batch["sample_id"])
    return len(np.unique(pairs)) < len(pairs)


class LoopInput:
    def __init__(self, loop: Any):
        """`loop`: the train/loop.py WorkerLoop that owns this part (not imported: no cycle)."""
        self.loop = loop
        self.echo_stage: ConsumptionEcho | None = None  # echo.factor: auto at consumption, on a reader
        self.ahead: Prefetch | None = None

    def batches(self, source: Iterable[dict] | None) -> Iterator[dict[str, np.ndarray]]:
        """Exact batch sizes keep workers in step; separate echoed copies if asked; in
        grouped mode the group's reader broadcasts every batch to its members."""
        lp, cfg = self.loop, self.loop.cfg
        batches = source
        if lp.reads and lp.worker_echo:
            pool_rows = shuffle_buffer_rows(cfg) or cfg.train.batch_size
            self.echo_stage = ConsumptionEcho(
                cfg.seed, cfg.train.batch_size, pool_rows,
                lp.env.link.live_factor, derive_seed(cfg.seed, STREAM_SAMPLER, lp.group),
                on_take=lambda b: lp.consumed.add(b["epoch"], b["sample_id"], b["echo_copy"]),
                agree=agree_min(lp.env.comm.gather) if lp.world > 1 else None, pool=lp.restored_pool,
                spare=SpareCopies(pool_rows, cfg.echo.max_factor) if lp.plan.fills_waits else None)
            batches = self.echo_stage.batches(source)
        elif lp.reads:
            batches = pack_unique(source, cfg.train.batch_size, max_carry=None if lp.plan.separate_copies else 0)
        if lp.grouped:
            from echoray.train.groups import broadcast_batches, make_groups

            pg = make_groups(lp.world, lp.copies)[lp.group]
            if lp.text:  # token rows, no labels (train/lm.py)
                from echoray.train.groups import INT_FIELDS

                return broadcast_batches(batches, pg, lp.layout.leader, (cfg.source.seq_len + 1,),
                                         cfg.train.batch_size, field="tokens", dtype=torch.int32,
                                         int_fields=tuple(f for f in INT_FIELDS if f != "label"))
            shape = (lp.image_size, lp.image_size, lp.channels)
            batches = broadcast_batches(batches, pg, lp.layout.leader, shape, cfg.train.batch_size)
        return batches

    def work(self, batches):
        """(batch, first repeat, repeats or None) per batch: a batch cut short by a checkpoint first."""
        lp = self.loop
        if lp.pending is not None:
            p, lp.pending = lp.pending, None
            yield p.batch, p.next_repeat, p.repeats
        for b in batches:
            yield b, 0, None

    def overlaps(self) -> bool:
        """Whether the input path runs on a thread ahead of the step (train/prefetch.py). Not
        where it makes collectives (a grouped broadcast, auto's agreement of several ranks:
        a thread's collectives would interleave with the step's)."""
        lp = self.loop
        return lp.lookahead > 0 and not lp.grouped and not (lp.worker_echo and lp.world > 1)

    def prepared(self, batches) -> Prefetch:
        """((batch, first repeat, repeats), make_inputs(batch)) for each item of work, in its
        order: pulled and made ahead of the step on a thread where overlaps()."""
        device = self.loop.device
        cuda = device.type == "cuda" and device.index is not None
        self.ahead = Prefetch(self.work(batches), lambda work: self.make_inputs(work[0]),
                              self.loop.lookahead if self.overlaps() else 0,
                              context=(lambda: torch.cuda.device(device)) if cuda else contextlib.nullcontext)
        return self.ahead

    def untrained_pool(self) -> dict[str, np.ndarray] | None:
        """Consumption echo's rows taken from the stream and not trained, a checkpoint's
        pending rows: the batches made ahead of the step (their rows are logged consumed),
        then the pool. Other paths log a batch when it trains: one made ahead is read again.
        None without consumption echo."""
        if self.echo_stage is None:
            return None
        ahead = [batch for (batch, _, _), _ in self.ahead.held()] if self.ahead is not None else []
        parts = [p for p in (*ahead, self.echo_stage.pending()) if p is not None and len(p["sample_id"])]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else None

    def record_batch(self, batch: dict[str, np.ndarray]) -> None:
        """A batch's first step: counted, checked for duplicates, its rows logged consumed."""
        lp = self.loop
        lp.state.batches += 1
        lp.state.dup_batches += has_duplicates(batch)
        if lp.reads and not lp.worker_echo:  # worker echo logs rows as it takes them
            lp.consumed.add(batch["epoch"], batch["sample_id"], batch["echo_copy"])

    def make_inputs(self, batch: dict[str, np.ndarray]):
        """(normalised inputs, labels, augmentation keys, audit rows) on the device. Batch
        augmentation lives here: view-major rows, all M views per sample in `local` mode,
        the member's one view in `grouped` mode (M = 1: plain worker-side augmentation).
        Text: inputs are token ids, labels the next tokens; views are identical copies
        that only dropout tells apart (the BA paper's intermediate augmentation)."""
        lp = self.loop
        if lp.text:
            from echoray.train.lm import split_tokens

            inputs, targets = split_tokens(lp.to_device("tokens", np.asarray(batch["tokens"], dtype=np.int32)))
            inputs, targets, aug_key, rows = worker_views(
                lp.cfg.seed, batch, inputs, targets, per_copy=False, views=lp.views, ops=[], on_worker=True)
            return inputs, targets, aug_key, rows
        images = lp.to_device("image", batch["image"])
        labels = lp.to_device("label", np.asarray(batch["label"], dtype=np.int64))
        images, labels, aug_key, rows = worker_views(
            lp.cfg.seed, batch, images, labels, per_copy=lp.plan.per_copy_augment,
            views=lp.views, ops=lp.ops, on_worker=lp.views_on_worker)
        return lp.normalize(images), labels, aug_key, rows
