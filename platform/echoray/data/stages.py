"""The preprocessing actor that Ray Data runs on a CPU pool:
read + decode -> [echo: before_augment] -> augment -> [echo: after_augment].

All parts run in one actor call, so a block crosses the object store once and
the echo costs no extra operator (a separate task stage measured 79% slower on
digits). The map_batches that runs it declares that it changes the row count, so
Ray's optimizer never moves a limit or split ahead of the echo. Each call reports
rows and busy time before and after the echo point to the run's collector, which
derives the upstream/downstream rates and R; no call waits on the collector (the reports
are batched, `auto`'s factor is the newest it answered: runtime/collector_feed.py). torch
is imported in the constructor, not at module level: Ray's coordinators unpickle this
class too and importing torch costs seconds per process on a small machine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import numpy as np

from echoray.accounting.consumed import drop_consumed
from echoray.config import AugmentOp
from echoray.data.echo import echo_rows
from echoray.data.op_shapes import crops_full_image
from echoray.data.plan import ChunkMap
from echoray.data.preprocess_args import PreprocessArgs
from echoray.data.sources.base import SourceError, read_skipping
from echoray.runtime.collector_feed import CollectorFeed
from echoray.seeds import STREAM_AUGMENT, mix, to_int63


def augment_keys(seed: int, batch: dict[str, np.ndarray], per_copy: bool) -> np.ndarray:
    """The key of each row's augmentation: per echo copy only when echo precedes it."""
    copy = batch["echo_copy"] if per_copy else np.zeros_like(batch["sample_id"])
    return mix(seed, STREAM_AUGMENT, batch["epoch"], batch["sample_id"], copy, 0, 0)


def augmenter(ops: list[AugmentOp], first: int) -> Callable[..., np.ndarray]:
    """augment_batch for uint8 numpy batches: data/augment_np.py's when it has every op
    (the actor then never imports torch: 1.4 s of its start), else data/augment.py's, with
    torch on one thread (an actor's CPU)."""
    from echoray.data import augment_np

    if augment_np.handles(ops, first):
        return augment_np.augment_batch
    import torch

    from echoray.data.augment import augment_batch

    torch.set_num_threads(1)
    return lambda images, keys, ops, first: augment_batch(torch.from_numpy(images), keys, ops, first).numpy()


class Preprocess:
    """(epoch, chunk) rows -> samples: epoch, sample_id, label, image, echo_copy, echo_copies, aug_key.

    Made from one PreprocessArgs (data/preprocess_args.py preprocess_args builds it)."""

    def __init__(self, args: PreprocessArgs):
        from echoray.data.sources import open_reader

        idx = args.idx
        self.idx, self.chunk_size, self.seed = idx, args.chunk_size, args.seed
        self.reader = open_reader(idx)
        self.chunks = ChunkMap(idx.train_ids, args.chunk_size, args.seed, idx.shuffled_reads)
        self.ops = args.ops
        # Photos with a random-resized crop first: cut from the full image (data/full_crop.py).
        self.full_crop = crops_full_image(self.ops) and idx.kind in ("image_folder", "parquet")
        self.echo_before, self.echo_after = args.echo_before_augment, args.echo_after_augment
        self.first = 0  # ops the decode applies (the crop, and a flip right after it)
        if self.full_crop:
            from echoray.data.full_crop import decoded_ops

            self.first = decoded_ops(self.ops, per_copy=self.echo_before)
        self._augment = augmenter(self.ops, self.first) if self.ops is not None else None
        self.auto = args.echo_factor == "auto"
        self.factor = 1.0 if self.auto else float(args.echo_factor)
        self.collector = args.collector
        self.consumed = args.consumed  # a restored run: rows its steps already took (accounting/consumed.py)
        self.actor = f"{os.uname().nodename}:{os.getpid()}"
        # the collector off the data path: reports batched, the live factor and the run's
        # bad-data verdict taken from earlier replies (runtime/collector_feed.py)
        self.feed = CollectorFeed.to(args.collector, self.actor, self.auto, self.factor, len(idx.train_ids),
                                     idx.max_bad_fraction)

    def __del__(self):
        """Ray Data releases an actor gracefully: its last reports reach the collector."""
        feed = getattr(self, "feed", None)
        if feed is not None:
            feed.close()

    def read(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.idx.kind == "text":
            return self.read_text(batch)
        parts = self.chunks.ids(batch["epoch"], batch["chunk"])
        ids = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        epochs = np.repeat(batch["epoch"], [len(p) for p in parts]).astype(np.int64)
        decoder, ragged = self._decoder(epochs, ids)
        got = read_skipping(self.reader, ids, "train", decoder, ragged)
        if got.bad:
            self._skip_bad(got.bad)
        return {
            "epoch": epochs[got.kept],
            "sample_id": ids[got.kept],
            "label": got.labels,
            "image": got.images,
            "echo_copy": np.zeros(int(got.kept.sum()), dtype=np.int64),
            "echo_copies": np.ones(int(got.kept.sum()), dtype=np.int64),  # set by the echo, if any
        }

    def read_text(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Text (data/text/source.py): each (epoch, unit) plan row becomes its packed sequences."""
        rows = self.reader.read_units("train", batch["epoch"], batch["chunk"])
        n = len(rows["sample_id"])
        return {**rows, "echo_copy": np.zeros(n, dtype=np.int64), "echo_copies": np.ones(n, dtype=np.int64)}

    def _decoder(self, epochs: np.ndarray, ids: np.ndarray):
        """(decoder, ragged) for the read: the source's square decode unless the crop is
        cut from full images; echo before augmentation keeps full decodes for its copies."""
        if not self.full_crop:
            return None, False
        from echoray.data.full_crop import crop_decoder, full_decoder

        if self.echo_before:
            return full_decoder(self.idx.channels), True
        keys = augment_keys(self.seed, {"epoch": epochs, "sample_id": ids}, per_copy=False)
        flip = self.ops[1] if self.first == 2 else None
        return crop_decoder(keys, self.ops[0], self.idx.channels, flip), False

    def _skip_bad(self, bad: list[tuple[int, str, str]]) -> None:
        """Skip undecodable files; fail once this actor's finds alone pass
        source.max_bad_fraction (the collector decides over all actors: CollectorFeed.bad)."""
        message = self.feed.bad(bad)
        if message is not None:
            raise SourceError(message)

    def augment(self, rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        keys = augment_keys(self.seed, rows, per_copy=self.echo_before)
        if self.ops is not None and "image" in rows:  # text rows have no image (and no augmentation)
            images = rows["image"]
            if images.dtype == object:  # full decodes: each echo copy cuts its own crop
                from echoray.data.full_crop import crop_each

                images = crop_each(images, keys, self.ops[0], self.idx.channels)
            rows["image"] = self._augment(images, keys, self.ops, self.first)  # the first ops: at decode time
        rows["aug_key"] = to_int63(keys)
        return rows

    def echo(self, rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.auto:
            self.factor = self.feed.factor()  # the newest the collector answered; never waits
        return echo_rows(rows, self.factor, self.seed)

    def __call__(self, batch: dict[str, np.ndarray]) -> Iterator[dict[str, np.ndarray]]:
        try:
            if (failure := self.feed.failure()) is not None:  # the run's bad-data budget is spent
                raise SourceError(failure)
            rows = self._process(batch)
        except SourceError as exc:  # bad data: tell the driver, so no retry is attempted
            self.feed.fatal(str(exc))
            raise
        if len(rows["sample_id"]):  # a block emptied by a replay or bad files is left out:
            yield rows  # Arrow cannot type an empty image column (it would pickle it)

    def _process(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        t0 = time.perf_counter()
        rows = self.read(batch)
        n_read = len(rows["sample_id"])
        if self.echo_before:
            rows = drop_consumed(self.echo(rows), self.consumed)
            t1 = time.perf_counter()
            rows = self.augment(rows)
            self._report(n_read, t1 - t0, len(rows["sample_id"]), time.perf_counter() - t1)
            return rows
        if not self.echo_after:
            rows = drop_consumed(rows, self.consumed)
        rows = self.augment(rows)
        if self.echo_after:
            rows = drop_consumed(self.echo(rows), self.consumed)
        self._report(n_read, time.perf_counter() - t0, 0, 0.0)
        return rows

    def _report(self, up_rows: int, up_s: float, down_rows: int, down_s: float) -> None:
        self.feed.stage("upstream", up_rows, up_s, reads=up_rows)
        if down_rows:
            self.feed.stage("downstream", down_rows, down_s)
