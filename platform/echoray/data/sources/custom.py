"""A reader of the user's own by import path: `source.kind: "package.module:MyReader"`.

The protocol (the built-in sources follow it too; see digits.py for the shortest):

    class MyReader:
        @staticmethod                 # or classmethod
        def index(cfg: SourceConfig) -> SourceIndex:
            '''Once, on the driver: list the items. Plain picklable data: num_classes,
            train_ids and eval_ids (int64 sample ids, stable for the dataset), image_size
            (the side of the square images read returns, or None), channels, and in
            `details` whatever read needs (paths, offsets). cfg.path, cfg.limit,
            cfg.holdout_fraction and cfg.options (a dict) are the YAML's. A reader
            whose reads wait on a network may set idx.read_concurrency (reads in flight
            per actor; left None: 16 for a URI source.path, else 1).'''

        def __init__(self, idx: SourceIndex):
            '''On every preprocessing actor and evaluating worker.'''

        def read(self, ids: np.ndarray, split: Literal["train", "eval"]):
            '''One chunk of ids -> (images uint8 N x H x W x C, labels int64 N), in order.'''

echoray then does the rest as for a built-in kind: the read plan (a seeded order per
epoch, chunks of source.chunk_size ids), reads in flight, replay of a restored
run's unread rows, and the accounting by sample id. An `index` that returns anything but
a SourceIndex, or labels outside [0, num_classes), is an error naming source.kind.
"""

from __future__ import annotations

import numpy as np

from echoray.config import SourceConfig
from echoray.data.sources.base import Reader, SourceError, SourceIndex
from echoray.plugins import load_object


def index(cfg: SourceConfig) -> SourceIndex:
    """The reader class's index, checked, its reader set to the import path (open_reader's
    key). Its kind stays "text" where the reader serves text units (an index made by the
    text source, read_units); any other kind becomes the import path (image rows)."""
    cls = load_object(cfg.kind, "source.kind")
    idx = cls.index(cfg)
    if not isinstance(idx, SourceIndex):
        raise SourceError(f"source.kind {cfg.kind!r}: index(cfg) returned {type(idx).__name__}, not a SourceIndex")
    idx.reader = cfg.kind
    if idx.kind != "text":
        idx.kind = cfg.kind
    idx.train_ids = np.asarray(idx.train_ids, dtype=np.int64)
    idx.eval_ids = np.asarray(idx.eval_ids, dtype=np.int64)
    return idx


class CheckedReader:
    """The user's reader, its output checked (dtype, count, labels), so a wrong array fails
    naming source.kind instead of deep in a train step."""

    def __init__(self, idx: SourceIndex):
        self.kind, self.num_classes = idx.reader, idx.num_classes
        self.inner: Reader = load_object(idx.reader, "source.kind")(idx)

    def read(self, ids: np.ndarray, split) -> tuple[np.ndarray, np.ndarray]:
        images, labels = self.inner.read(np.asarray(ids, dtype=np.int64), split)
        images, labels = np.asarray(images), np.asarray(labels)
        if images.dtype != np.uint8 or images.ndim != 4 or len(images) != len(ids):
            raise SourceError(f"source.kind {self.kind!r}: read returned images {images.dtype} "
                              f"{images.shape} for {len(ids)} ids (want uint8 N x H x W x C)")
        if labels.shape != (len(ids),) or (len(ids) and not (0 <= labels.min() and labels.max() < self.num_classes)):
            raise SourceError(f"source.kind {self.kind!r}: read returned labels {labels.shape} outside "
                              f"[0, {self.num_classes}) or not one per id")
        return images, labels.astype(np.int64)


def text_reader(idx: SourceIndex):
    """The user's reader of text units (its index is the text source's, kind "text")."""
    return load_object(idx.reader, "source.kind")(idx)
