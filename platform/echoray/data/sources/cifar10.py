"""CIFAR-10 from the official binary batches (`cifar-10-batches-bin`), read by byte range.

Each record is 1 label byte + 3,072 pixel bytes (R, G, B planes of 32x32), so a
sample id maps to (file, offset) and a chunk of ids is one ranged read: the same
access pattern over S3/GCS as on local disk. The python batches
(`cifar-10-batches-py`) are accepted through a plain-data-only unpickler.
"""

from __future__ import annotations

import numpy as np
import pyarrow.fs as pafs

from echoray.config import SourceConfig
from echoray.data.decode import resize_batch
from echoray.data.sources.base import (
    SourceError,
    SourceIndex,
    Split,
    contiguous_runs,
    filesystem,
    require_dir,
)
from echoray.data.sources.safe_unpickle import load_plain

RECORD = 1 + 32 * 32 * 3
TRAIN_BIN = [f"data_batch_{i}.bin" for i in range(1, 6)]
TRAIN_PY = [f"data_batch_{i}" for i in range(1, 6)]


def _files(fs: pafs.FileSystem, root: str, names: list[str]) -> list[tuple[str, int]]:
    out = []
    for name in names:
        info = fs.get_file_info(f"{root}/{name}")
        if info.type == pafs.FileType.File:
            out.append((info.path, info.size))
    return out


def index(cfg: SourceConfig) -> SourceIndex:
    fs, root = filesystem(cfg.path)
    require_dir(fs, root, "source.path")
    train = _files(fs, root, TRAIN_BIN)
    if train:
        fmt, evals = "bin", _files(fs, root, ["test_batch.bin"])
        for path, size in train + evals:
            if size == 0 or size % RECORD:
                raise SourceError(f"{path}: {size} bytes is not a whole number of CIFAR records")
        counts = [size // RECORD for _, size in train], [size // RECORD for _, size in evals]
        _check_bin_labels(fs, train, cfg.limit)
        _check_bin_labels(fs, evals, cfg.eval_limit)
    else:
        train, evals = _files(fs, root, TRAIN_PY), _files(fs, root, ["test_batch"])
        if not train:
            raise SourceError(
                f"source.path {cfg.path}: no data_batch_*.bin (binary) or data_batch_* "
                "(python) CIFAR-10 batches found"
            )
        fmt = "py"
        counts = [[_py_count(fs, p) for p, _ in train], [_py_count(fs, p) for p, _ in evals]]
    n_train, n_eval = sum(counts[0]), sum(counts[1])
    train_ids = np.arange(n_train, dtype=np.int64)[: cfg.limit]
    eval_ids = np.arange(n_eval, dtype=np.int64)[: cfg.eval_limit]
    return SourceIndex(
        kind="cifar10",
        num_classes=10,
        train_ids=train_ids,
        eval_ids=eval_ids,
        image_size=cfg.image_size or 32,
        channels=3,
        details={
            "uri": cfg.path,
            "format": fmt,
            "train": [p for p, _ in train],
            "eval": [p for p, _ in evals],
            "train_counts": counts[0],
            "eval_counts": counts[1],
        },
    )


def _check_bin_labels(fs: pafs.FileSystem, files: list[tuple[str, int]], limit: int | None) -> None:
    """Every label byte of the records the run will use is a class 0..9 (one read per file)."""
    left = limit
    for path, size in files:
        n = size // RECORD if left is None else min(size // RECORD, left)
        if n <= 0:
            return
        with fs.open_input_file(path) as f:
            labels = np.frombuffer(f.read_at(n * RECORD, 0), dtype=np.uint8)[::RECORD]
        if (labels >= 10).any():
            i = int(np.flatnonzero(labels >= 10)[0])
            raise SourceError(f"{path}: record {i} has label {labels[i]}, out of range 0..9")
        left = None if left is None else left - n


def _py_count(fs: pafs.FileSystem, path: str) -> int:
    labels = _load_py(fs, path)[1]
    if len(labels) and (labels.min() < 0 or labels.max() >= 10):
        i = int(np.flatnonzero((labels < 0) | (labels >= 10))[0])
        raise SourceError(f"{path}: record {i} has label {labels[i]}, out of range 0..9")
    return len(labels)


def _load_py(fs: pafs.FileSystem, path: str) -> tuple[np.ndarray, np.ndarray]:
    with fs.open_input_file(path) as f:
        batch = load_plain(f.read(), path)
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise SourceError(f"{path}: not a CIFAR python batch (no data/labels)")
    try:
        data = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
        labels = np.asarray(batch[b"labels"], dtype=np.int64).reshape(-1)
    except (ValueError, TypeError) as exc:
        raise SourceError(f"{path}: not a CIFAR python batch ({exc})") from None
    if len(labels) != len(data):
        raise SourceError(f"{path}: {len(data)} images but {len(labels)} labels")
    return data.transpose(0, 2, 3, 1), labels


class CifarReader:
    def __init__(self, idx: SourceIndex):
        self.idx = idx
        self.fs, _ = filesystem(idx.details["uri"])
        self.size = idx.image_size
        self._py_cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _locate(self, split: Split) -> tuple[list[str], np.ndarray]:
        files = self.idx.details[split]
        starts = np.concatenate([[0], np.cumsum(self.idx.details[f"{split}_counts"])])
        return files, starts

    def _read_range(self, files: list[str], starts: np.ndarray, a: int, b: int) -> np.ndarray:
        """Raw records [a, b) as an (n, RECORD) uint8 array, possibly across files."""
        parts = []
        while a < b:
            f = int(np.searchsorted(starts, a, side="right") - 1)
            stop = min(b, int(starts[f + 1]))
            with self.fs.open_input_file(files[f]) as fh:
                raw = fh.read_at((stop - a) * RECORD, (a - int(starts[f])) * RECORD)
            parts.append(np.frombuffer(raw, dtype=np.uint8).reshape(-1, RECORD))
            a = stop
        return np.concatenate(parts)

    def read(self, ids: np.ndarray, split: Split) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(ids, dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        files, starts = self._locate(split)
        if self.idx.details["format"] == "py":
            images, labels = self._read_py(files, starts, sorted_ids)
        else:
            # Read each distinct id once; duplicates (allowed, never planned) re-expand.
            uniq, inverse = np.unique(sorted_ids, return_inverse=True)
            recs = np.concatenate(
                [self._read_range(files, starts, a, b) for a, b in contiguous_runs(uniq)]
            )[inverse]
            labels = recs[:, 0].astype(np.int64)
            images = recs[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        out_images = np.empty_like(images)
        out_labels = np.empty_like(labels)
        out_images[order], out_labels[order] = images, labels
        if np.any(out_labels >= 10):
            bad = int(out_labels[out_labels >= 10][0])
            raise SourceError(f"{self.idx.details['uri']}: label {bad} out of range 0..9")
        return resize_batch(np.ascontiguousarray(out_images), self.size), out_labels

    def _read_py(self, files, starts, sorted_ids):
        images, labels = [], []
        for i in sorted_ids:
            f = int(np.searchsorted(starts, i, side="right") - 1)
            if files[f] not in self._py_cache:
                self._py_cache[files[f]] = _load_py(self.fs, files[f])
            data, lab = self._py_cache[files[f]]
            images.append(data[i - starts[f]])
            labels.append(lab[i - starts[f]])
        return np.stack(images), np.asarray(labels, dtype=np.int64)
