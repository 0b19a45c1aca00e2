"""Callable classes that Ray Data runs on CPU actor pools (read+decode, augment).

They hold per-actor state (an open reader, the op list) and call the pure
functions in sources/, augment.py and seeds.py. Each reports its rows and busy
time to the run's collector, which derives the upstream/downstream rates and R.
Ray's coordinator processes unpickle these classes too, so torch is imported in
the actors' constructors, not here: it costs seconds per process on a small machine.
"""

from __future__ import annotations

import os
import time

import numpy as np

from echoray.config import AugmentOp, RemoteEmulation
from echoray.data.plan import chunk_ids
from echoray.data.sources.base import SourceIndex
from echoray.seeds import STREAM_AUGMENT, mix, to_int63


class _Reporter:
    def __init__(self, collector, stage: str):
        self.collector = collector
        self.stage = stage
        self.actor = f"{os.uname().nodename}:{os.getpid()}"

    def __call__(self, rows: int, busy_s: float, reads: int = 0) -> None:
        if self.collector is not None:
            self.collector.stage.remote(self.stage, self.actor, rows, busy_s, reads)


def emulated_network_wait(remote: RemoteEmulation, n_requests: int, n_bytes: int) -> float:
    """Seconds a remote store would keep us waiting: per-request latency + transfer time."""
    wait = n_requests * remote.latency_ms / 1000.0
    if remote.bandwidth_mb_s:
        wait += n_bytes / (remote.bandwidth_mb_s * 1e6)
    return wait


class ReadDecode:
    """(epoch, chunk) rows -> one row per sample: epoch, sample_id, label, image, echo_copy."""

    def __init__(self, idx: SourceIndex, chunk_size: int, remote: RemoteEmulation, collector=None):
        from echoray.data.sources import open_reader

        self.idx = idx
        self.chunk_size = chunk_size
        self.remote = remote
        self.reader = open_reader(idx)
        self.report = _Reporter(collector, "read")

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        t0 = time.perf_counter()
        parts = chunk_ids(self.idx.train_ids, batch["chunk"], self.chunk_size)
        ids = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        epochs = np.repeat(batch["epoch"], [len(p) for p in parts]).astype(np.int64)
        images, labels = self.reader.read(ids, "train")
        wait = emulated_network_wait(self.remote, len(parts), images.nbytes)
        if wait > 0:
            time.sleep(wait)  # waiting, not computing: what a network read costs
        self.report(len(ids), time.perf_counter() - t0, reads=len(ids))
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
        self.report = _Reporter(collector, "augment")

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        t0 = time.perf_counter()
        keys = augment_keys(self.seed, batch, self.per_copy)
        images = self._augment(self._torch.from_numpy(batch["image"]), keys, self.ops).numpy()
        self.report(len(keys), time.perf_counter() - t0)
        return {**batch, "image": images, "aug_key": to_int63(keys)}


class ReadDecodeAugment:
    """Both stages in one actor, used when no echo sits between them: one process
    (and one torch import) fewer per pool, and no hand-off through the object store."""

    def __init__(self, idx: SourceIndex, chunk_size: int, remote: RemoteEmulation,
                 ops: list[AugmentOp], seed: int, collector=None):
        self.read = ReadDecode(idx, chunk_size, remote)
        self.augment = Augment(ops, seed, per_copy=False)
        self.report = _Reporter(collector, "preprocess")

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        t0 = time.perf_counter()
        out = self.augment(self.read(batch))
        n = len(out["sample_id"])
        self.report(n, time.perf_counter() - t0, reads=n)
        return out
