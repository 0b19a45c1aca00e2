"""`echoray.api.train(dataset=ds)`: a user's ray.data.Dataset as the run's source, through the
reader protocol of custom.py (source.kind "echoray.data.sources.dataset:DatasetReader").

The driver materialises the Dataset's image and label columns once (register), so it gets
echoray's whole path: the seeded read plan, the CPU actor pool, echo, replay and exact
accounting, which all address samples by id. Sample ids are the user's id column (distinct
non-negative integers) or, without one, the row's position in the Dataset's order. The held-out
split is source.holdout_fraction of the rows (fixed seed, as for the built-in sources).
What fits: a dataset the driver can hold (the arrays travel in the source index to every
actor, as the digits source's do). A registered dataset lives in the registering process:
a resumed run or a search cannot re-read it (an error names source.options.dataset).
"""

from __future__ import annotations

import uuid

import numpy as np

from echoray.config import SourceConfig
from echoray.data.plan import split_holdout
from echoray.data.sources.base import SourceError, SourceIndex, Split

READER = "echoray.data.sources.dataset:DatasetReader"
_REGISTERED: dict[str, dict[str, np.ndarray]] = {}


def _column(parts: list[dict], name: str, what: str) -> np.ndarray:
    if parts and name not in parts[0]:
        raise SourceError(f"dataset: no {what} column {name!r} (columns: {sorted(parts[0])})")
    return np.concatenate([np.asarray(p[name]) for p in parts]) if parts else np.zeros(0)


def arrays(ds, image_column: str = "image", label_column: str = "label",
           id_column: str | None = None) -> dict[str, np.ndarray]:
    """The Dataset's images (uint8 N x S x S x C), labels (int64) and ids (int64), checked."""
    columns = [c for c in (image_column, label_column, id_column) if c]
    parts = list(ds.select_columns(columns).iter_batches(batch_format="numpy", batch_size=4096))
    images = _column(parts, image_column, "image")
    labels = _column(parts, label_column, "label")
    if images.ndim == 3:
        images = images[..., None]
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1] != images.shape[2]:
        raise SourceError(f"dataset column {image_column!r}: want uint8 square images (N x S x S [x C]), "
                          f"got {images.dtype} {images.shape}")
    if not np.issubdtype(labels.dtype, np.integer) or (len(labels) and labels.min() < 0):
        raise SourceError(f"dataset column {label_column!r}: want non-negative integer labels, got {labels.dtype}")
    ids = _column(parts, id_column, "id") if id_column else np.arange(len(labels))
    if id_column and (not np.issubdtype(ids.dtype, np.integer) or len(np.unique(ids)) != len(ids)
                      or (len(ids) and ids.min() < 0)):
        raise SourceError(f"dataset column {id_column!r}: sample ids must be distinct non-negative integers")
    return {"images": images, "labels": labels.astype(np.int64), "ids": ids.astype(np.int64)}


def register(ds, **columns) -> str:
    """Materialise ds (arrays) in this process; returns the token for source.options.dataset."""
    token = uuid.uuid4().hex
    _REGISTERED[token] = arrays(ds, **columns)
    return token


class DatasetReader:
    @staticmethod
    def index(cfg: SourceConfig) -> SourceIndex:
        data = _REGISTERED.get(cfg.options.get("dataset"))
        if data is None:
            raise SourceError("source.options.dataset: no Dataset registered in this process "
                              "(only echoray.api.train(dataset=...) gives one; a resumed run or a search cannot)")
        n = len(data["ids"])
        if n < 2:
            raise SourceError(f"dataset: {n} rows, too few to hold some out")
        train_pos, eval_pos = split_holdout(n, cfg.holdout_fraction, 0)
        images = data["images"]
        if cfg.image_size and cfg.image_size != images.shape[1]:
            from echoray.data.decode import resize_batch

            images = resize_batch(images, cfg.image_size)
        order = np.argsort(data["ids"])
        return SourceIndex(
            kind=READER, num_classes=int(cfg.options.get("num_classes", int(data["labels"].max()) + 1)),
            train_ids=np.sort(data["ids"][train_pos])[: cfg.limit], eval_ids=np.sort(data["ids"][eval_pos])[: cfg.eval_limit],
            image_size=int(images.shape[1]), channels=int(images.shape[3]),
            details={"images": images, "labels": data["labels"], "sorted_ids": data["ids"][order], "order": order})

    def __init__(self, idx: SourceIndex):
        d = idx.details
        self.images, self.labels, self.sorted_ids, self.order = d["images"], d["labels"], d["sorted_ids"], d["order"]

    def read(self, ids: np.ndarray, split: Split) -> tuple[np.ndarray, np.ndarray]:
        pos = self.order[np.searchsorted(self.sorted_ids, np.asarray(ids, dtype=np.int64))]
        return self.images[pos], self.labels[pos]
