"""Parquet files of encoded image bytes + integer label (columns configurable).

Ids are global row numbers across the files (sorted by path); a chunk of ids is
read as the row groups that cover it, so `source.chunk_size` near the row-group
size keeps reads sequential.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from echoray.config import SourceConfig
from echoray.data.decode import decode_many, stack_images
from echoray.data.plan import split_holdout
from echoray.data.sources.base import ReadResult, SourceError, SourceIndex, Split, filesystem

SPLIT_SEED = 0


def _list(uri: str, key: str, image_col: str, label_col: str) -> list[dict]:
    fs, root = filesystem(uri, key)
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.NotFound:
        raise SourceError(f"{key} {uri}: no such file or directory")
    if info.type == pafs.FileType.File:
        paths = [root]
    else:
        sel = pafs.FileSelector(root, recursive=True)
        paths = sorted(i.path for i in fs.get_file_info(sel) if i.path.endswith(".parquet"))
    if not paths:
        raise SourceError(f"{key} {uri}: no .parquet files")
    files = []
    for p in paths:
        with fs.open_input_file(p) as f:
            meta = pq.ParquetFile(f).metadata
            names = meta.schema.names
            for col in (image_col, label_col):
                if col not in names:
                    raise SourceError(f"{p}: no column {col!r} (columns: {names})")
            groups = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        files.append({"path": p, "groups": groups})
    return files


def _labels(uri: str, files: list[dict], label_col: str, key: str) -> np.ndarray:
    fs, _ = filesystem(uri)
    parts = []
    for f in files:
        with fs.open_input_file(f["path"]) as fh:
            col = pq.read_table(fh, columns=[label_col]).column(0)
        if not pa.types.is_integer(col.type):
            raise SourceError(f"{f['path']}: column {label_col!r} holds {col.type}, expected integer class labels")
        if col.null_count:
            raise SourceError(f"{f['path']}: column {label_col!r} has {col.null_count} missing label(s)")
        parts.append(col.to_numpy())
    labels = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    if not len(labels):
        raise SourceError(f"{key} {uri}: the Parquet data has no rows")
    return labels


def index(cfg: SourceConfig) -> SourceIndex:
    files = _list(cfg.path, "source.path", cfg.image_column, cfg.label_column)
    labels = _labels(cfg.path, files, cfg.label_column, "source.path")
    if labels.min() < 0:
        raise SourceError(f"source.path {cfg.path}: label {labels.min()} out of range (class labels start at 0)")
    num_classes = int(labels.max()) + 1
    if cfg.eval_path:
        efiles = _list(cfg.eval_path, "source.eval_path", cfg.image_column, cfg.label_column)
        elabels = _labels(cfg.eval_path, efiles, cfg.label_column, "source.eval_path")
        if elabels.max() >= num_classes or elabels.min() < 0:
            bad = int(elabels[(elabels >= num_classes) | (elabels < 0)][0])
            raise SourceError(f"source.eval_path {cfg.eval_path}: label {bad} out of range 0..{num_classes - 1} "
                              "(the classes seen in source.path)")
        train_ids, eval_ids = np.arange(len(labels)), np.arange(len(elabels))
    else:
        efiles = files
        train_ids, eval_ids = split_holdout(len(labels), cfg.holdout_fraction, SPLIT_SEED)
    return SourceIndex(
        kind="parquet",
        num_classes=num_classes,
        train_ids=train_ids[: cfg.limit].astype(np.int64),
        eval_ids=eval_ids[: cfg.eval_limit].astype(np.int64),
        image_size=cfg.image_size,
        channels=3,
        details={
            "train_uri": cfg.path,
            "eval_uri": cfg.eval_path or cfg.path,
            "train": files,
            "eval": efiles,
            "image_column": cfg.image_column,
            "label_column": cfg.label_column,
        },
        max_bad_fraction=cfg.max_bad_fraction,
    )


class ParquetReader:
    def __init__(self, idx: SourceIndex):
        self.idx = idx
        d = idx.details
        self.fs = {"train": filesystem(d["train_uri"])[0], "eval": filesystem(d["eval_uri"])[0]}
        # Global row id -> (file, row group) via cumulative row counts.
        self.groups = {}
        for split in ("train", "eval"):
            flat = [(fi, gi, n) for fi, f in enumerate(d[split]) for gi, n in enumerate(f["groups"])]
            starts = np.concatenate([[0], np.cumsum([n for _, _, n in flat])])
            self.groups[split] = (flat, starts)
        self._cache: tuple | None = None

    def _group(self, split: Split, g: int):
        key = (split, g)
        if self._cache is None or self._cache[0] != key:
            flat, _ = self.groups[split]
            fi, gi, _ = flat[g]
            d = self.idx.details
            with self.fs[split].open_input_file(d[split][fi]["path"]) as fh:
                t = pq.ParquetFile(fh).read_row_group(gi, columns=[d["image_column"], d["label_column"]])
            self._cache = (key, t.column(0).to_pylist(), t.column(1).to_numpy(), d[split][fi]["path"])
        return self._cache[1:]

    def read(self, ids: np.ndarray, split: Split) -> tuple[np.ndarray, np.ndarray]:
        r = self._read(ids, split, skip_bad=False)
        return r.images, r.labels

    def read_skipping(self, ids: np.ndarray, split: Split, decoder=None, ragged: bool = False) -> ReadResult:
        return self._read(ids, split, skip_bad=True, decoder=decoder, ragged=ragged)

    def _read(self, ids: np.ndarray, split: Split, skip_bad: bool, decoder=None, ragged: bool = False) -> ReadResult:
        ids = np.asarray(ids, dtype=np.int64)
        _, starts = self.groups[split]
        order = np.argsort(ids, kind="stable")
        raw: list = [None] * len(ids)
        labels = np.empty(len(ids), dtype=np.int64)
        names: list = [None] * len(ids)
        for pos in order:  # sorted, so each row group is read once per call
            i = int(ids[pos])
            g = int(np.searchsorted(starts, i, side="right") - 1)
            data, labs, path = self._group(split, g)
            row = i - int(starts[g])
            names[pos] = f"{path}[row {row}]"
            raw[pos] = data[row]
            labels[pos] = labs[row]
        arrays, kept_names, kept, bad = decode_many(zip(ids, raw, names, strict=True), self.idx.image_size, 3,
                                                    skip_bad, decoder)
        images = stack_images(arrays, kept_names, self.idx.image_size, ragged=ragged)
        return ReadResult(images, labels[kept], kept, bad)
