"""Callable classes that Ray Data runs on CPU actor pools (read+decode, augment).

They hold per-actor state (an open reader, the op list) and call the pure
functions in sources/, augment.py and seeds.py. Ray's coordinator processes
unpickle these classes too, so torch is imported in the actors' constructors,
not here: importing it costs seconds per process on a small machine.
"""

from __future__ import annotations

import time

import numpy as np

from echoray.config import AugmentOp, RemoteEmulation
from echoray.data.plan import chunk_ids
from echoray.data.sources.base import SourceIndex
from echoray.seeds import STREAM_AUGMENT, mix, to_int63


class ReadDecode:
    """(epoch, chunk) rows -> one row per sample: epoch, sample_id, label, image, echo_copy."""

    def __init__(self, idx: SourceIndex, chunk_size: int, remote: RemoteEmulation, collector=None):
        self.idx = idx
        self.chunk_size = chunk_size
        self.remote = remote
        from echoray.data.sources import open_reader

        self.reader = open_reader(idx)
        self.collector = collector

    def _emulate_network(self, n_requests: int, n_bytes: int) -> None:
        wait = n_requests * self.remote.latency_ms / 1000.0
        if self.remote.bandwidth_mb_s:
            wait += n_bytes / (self.remote.bandwidth_mb_s * 1e6)
        if wait > 0:
            time.sleep(wait)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        t0 = time.perf_counter()
        parts = chunk_ids(self.idx.train_ids, batch["chunk"], self.chunk_size)
        ids = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        epochs = np.repeat(batch["epoch"], [len(p) for p in parts]).astype(np.int64)
        images, labels = self.reader.read(ids, "train")
        self._emulate_network(len(parts), images.nbytes)
        if self.collector is not None:
            self.collector.reads.remote(len(ids), time.perf_counter() - t0)
        return {
            "epoch": epochs,
            "sample_id": ids,
            "label": labels,
            "image": images,
            "echo_copy": np.zeros(len(ids), dtype=np.int64),
        }


def augment_keys(seed: int, batch: dict[str, np.ndarray], per_copy: bool) -> np.ndarray:
    """The key of each row's augmentation: per echo copy only when echo precedes it."""
    copy = batch["echo_copy"] if per_copy else np.zeros_like(batch["sample_id"])
    return mix(seed, STREAM_AUGMENT, batch["epoch"], batch["sample_id"], copy, 0, 0)


class Augment:
    """Applies the configured ops on CPU tensors inside a Ray Data actor."""

    def __init__(self, ops: list[AugmentOp], seed: int, per_copy: bool, collector=None):
        import torch

        from echoray.data.augment import augment_batch

        torch.set_num_threads(1)
        self._torch, self._augment = torch, augment_batch
        self.ops = ops
        self.seed = seed
        self.per_copy = per_copy
        self.collector = collector

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        t0 = time.perf_counter()
        keys = augment_keys(self.seed, batch, self.per_copy)
        images = self._augment(self._torch.from_numpy(batch["image"]), keys, self.ops).numpy()
        if self.collector is not None:
            self.collector.reads.remote(0, time.perf_counter() - t0)
        return {**batch, "image": images, "aug_key": to_int63(keys)}


class ReadDecodeAugment:
    """Both stages in one actor, used when no echo sits between them: one process
    (and one torch import) fewer per pool, and no hand-off through the object store."""

    def __init__(self, idx: SourceIndex, chunk_size: int, remote: RemoteEmulation,
                 ops: list[AugmentOp], seed: int, collector=None):
        self.read = ReadDecode(idx, chunk_size, remote, collector)
        self.augment = Augment(ops, seed, per_copy=False, collector=collector)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.augment(self.read(batch))
