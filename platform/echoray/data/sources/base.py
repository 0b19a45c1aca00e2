"""What every source provides: a picklable index and a reader over it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import pyarrow.fs as pafs

Split = Literal["train", "eval"]

# Reads in flight where a read waits on a network: 16 hide a 20 ms request's latency, and one
# read at a time is the fastest on local files (benchmarks/results/input_pipeline.json, input_pipeline_quiet.json).
NETWORK_READS_IN_FLIGHT = 16


class SourceError(ValueError):
    """A dataset that cannot be used as configured; the message names the path."""


@dataclass
class SourceIndex:
    """Plain data describing a dataset: sent once to every actor and worker."""

    kind: str
    num_classes: int
    train_ids: np.ndarray
    eval_ids: np.ndarray
    image_size: int | None
    channels: int
    # Kind-specific locations (row counts, FileTables of paths: data/sources/file_table.py).
    details: dict[str, Any] = field(default_factory=dict)
    max_bad_fraction: float = 0.0
    # Reads in flight per reader (files of an image folder). A reader's index(cfg) may declare
    # its own (one over a network of its own sets NETWORK_READS_IN_FLIGHT); None: index_source
    # decides, NETWORK_READS_IN_FLIGHT for a URI path, else 1.
    read_concurrency: int | None = None
    # True where every sample is its own read (a file, an object): the read plan then draws
    # each chunk's ids at random per (seed, epoch) (data/plan.py). False (the default):
    # neighbours share a read (a record file, a row group), chunks keep neighbouring ids.
    shuffled_reads: bool = False
    # Where each split is read from, as the error of an outage names it ("source.path s3://...":
    # set by index_source), and how long reads wait out an object store that stopped
    # answering (TrainConfig.store_retry_s; echoray/storage/retry.py).
    locations: dict[str, str] = field(default_factory=dict)
    retry_s: float = 120.0
    # The import path of the reader that made this index (source.kind "package.module:Reader",
    # data/sources/custom.py), None for a built-in kind. `kind` is then what the rows are:
    # the import path for images, or "text" where the reader serves text units as
    # data/text/source.py's TextReader does (read_units).
    reader: str | None = None


class Reader(Protocol):
    def read(self, ids: np.ndarray, split: Split) -> tuple[np.ndarray, np.ndarray]:
        """Images (uint8, N x H x W x C, at the index's image size) and int64 labels."""
        ...


@dataclass
class ReadResult:
    """A read that skipped undecodable files: images and labels of the `kept` ids only."""

    images: np.ndarray
    labels: np.ndarray
    kept: np.ndarray  # bool mask over the requested ids
    bad: list[tuple[int, str, str]]  # (sample id, file name, reason) of each skipped one


def read_skipping(reader: Reader, ids: np.ndarray, split: Split, decoder=None, ragged: bool = False) -> ReadResult:
    """Readers that decode files (image folders, Parquet) skip the ones that fail, and
    take a `decoder` (position, bytes, name) -> array (e.g. a crop per image) and
    `ragged` (keep images of different sizes); the fixed-size binary formats have
    nothing to skip or decode."""
    own = getattr(reader, "read_skipping", None)
    if own is not None:
        return own(ids, split, decoder=decoder, ragged=ragged) if decoder or ragged else own(ids, split)
    images, labels = reader.read(ids, split)
    return ReadResult(images, labels, np.ones(len(ids), dtype=bool), [])


def filesystem(uri: str, key: str = "source.path") -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem Ray Data would use for `uri` (local paths too). An object
    store's bucket, credentials and endpoint are checked here (echoray/storage/fs.py), so
    every source reads `s3://bucket/prefix` as it reads a folder and fails naming it."""
    from echoray.storage.fs import StorageError, open_location

    try:
        return open_location(uri, key)
    except StorageError as exc:
        raise SourceError(str(exc)) from None


def shown(fs: pafs.FileSystem, path: str) -> str:
    """A path as the user wrote it: with its scheme when it is in an object store."""
    return path if fs.type_name == "local" else f"{fs.type_name}://{path}"


def require_dir(fs: pafs.FileSystem, path: str, key: str) -> None:
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise SourceError(f"{key} {shown(fs, path)}: no such directory")
    if info.type != pafs.FileType.Directory:
        raise SourceError(f"{key} {shown(fs, path)}: not a directory")


def contiguous_runs(ids: np.ndarray) -> list[tuple[int, int]]:
    """Sorted ids -> [(start, stop)) runs of consecutive ids, to batch range reads."""
    ids = np.asarray(ids)
    if len(ids) == 0:
        return []
    breaks = np.flatnonzero(np.diff(ids) != 1) + 1
    starts = np.concatenate([[0], breaks])
    stops = np.concatenate([breaks, [len(ids)]])
    return [(int(ids[a]), int(ids[b - 1]) + 1) for a, b in zip(starts, stops, strict=True)]
