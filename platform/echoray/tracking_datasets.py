"""MLflow dataset inputs: what a run trained on (context `training`) and scored on
(`evaluation`), as the run page's Datasets list shows them.

Each split is an MLflow `MetaDataset` (mlflow.data) with
  source   the split's path or URI (source.path / source.eval_path), resolved by MLflow's
           own dataset-source registry (a folder, s3://...); a source without a path (an
           in-memory or user reader) names its kind instead;
  digest   16 hex digits of a SHA-256 over the split's index: every file's name, size and
           modification time (one listing or one stat per file, never the files' bytes),
           the kind's own layout (Parquet row groups, CIFAR record counts, text units) and
           the split's sample ids (a `source.limit` or another hold-out is other data);
  profile  the number of examples (and classes, files);
  schema   the tensors a reader yields: images uint8 N x H x W x C and int64 labels, or a
           text source's int64 token rows of source.seq_len + 1.
Measured: docs/concepts.md (MLflow: the digest's time on the tests' largest index).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from typing import Any

import numpy as np

from echoray.data.sources import SourceIndex

CONTEXTS = {"train": "training", "eval": "evaluation"}
_SAMPLED_ROWS = 64  # rows of an in-memory array that enter its digest (evenly spaced)
_STAT_AT_MOST = 16  # files stat'ed one by one (an object store: a request each); more: one listing


def split_files(idx: SourceIndex, split: str) -> tuple[str | None, list[str] | str, Any]:
    """(URI, the fs paths of the split's files or a root folder to list, the kind's layout)."""
    d = idx.details
    if idx.kind == "image_folder":
        table = d[split]
        return d["uri" if split == "train" else "eval_uri"], table.root, d["classes"]
    if idx.kind == "parquet":
        files = d[split]
        return d[f"{split}_uri"], [f["path"] for f in files], [f["groups"] for f in files]
    if idx.kind == "cifar10":
        return d["uri"], list(d[split]), [d["format"], d[f"{split}_counts"]]
    if idx.kind == "idx":
        s = d[split]
        return d["uri"], [s["images"]], [s["offset"], s["count"], s["rows"], s["cols"], _array_digest(s["labels"])]
    if idx.kind == "text":
        docs = d[f"{split}_docs"]
        layout = [d["seq_len"], len(d[f"{split}_units"]), int(d[f"{split}_base"][-1]),
                  hashlib.sha256(json.dumps(d["tokenizer"], sort_keys=True, default=str).encode()).hexdigest()]
        return d[f"{split}_uri"], sorted({doc.path for doc in docs}), layout
    return None, [], _details_digest(d)  # digits, a user's reader, an in-memory dataset


def file_stats(uri: str, where: list[str] | str) -> list[tuple[str, int, int]]:
    """(path, size, mtime in ns) of each file: one recursive listing of a root folder (or of
    the URI's folder when more than a few files are named), else one stat per named file.
    Nothing is read."""
    import pyarrow.fs as pafs

    from echoray.data.sources.base import filesystem

    fs, root = filesystem(uri)
    keep = None
    if not isinstance(where, str) and len(where) > _STAT_AT_MOST:  # many files: list their folder once
        where, keep = root, set(where)
    if isinstance(where, str):
        infos = fs.get_file_info(pafs.FileSelector(where, recursive=True))
    else:
        infos = fs.get_file_info(where) if where else []
    return sorted((i.path, int(i.size or 0), int(i.mtime_ns or 0))
                  for i in infos if i.type == pafs.FileType.File and (keep is None or i.path in keep))


def split_digest(idx: SourceIndex, split: str) -> str:
    """The split's digest: changes when a file of it is added, removed, renamed, resized or
    rewritten (its mtime), or when the index takes other samples of it."""
    uri, where, layout = split_files(idx, split)
    ids = idx.train_ids if split == "train" else idx.eval_ids
    fingerprint = {
        "kind": idx.kind, "num_classes": idx.num_classes, "image_size": idx.image_size,
        "channels": idx.channels, "ids": _array_digest(np.asarray(ids, np.int64), whole=True),
        "layout": layout, "files": file_stats(uri, where) if uri else [],
    }
    blob = json.dumps(fingerprint, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _array_digest(a: np.ndarray, whole: bool = False) -> str:
    """An array's shape, dtype and bytes: all of them (`whole`), else evenly spaced rows."""
    a = np.asarray(a)
    if not whole and len(a) > _SAMPLED_ROWS:
        a = a[np.linspace(0, len(a) - 1, _SAMPLED_ROWS).astype(np.int64)]
    h = hashlib.sha256(f"{a.shape}{a.dtype}".encode())
    h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _details_digest(details: dict[str, Any]) -> list:
    out = []
    for k in sorted(details):
        v = details[k]
        out.append([k, _array_digest(v) if isinstance(v, np.ndarray) else repr(v)[:10_000]])
    return out


def split_dataset(idx: SourceIndex, split: str):
    """The split as an MLflow MetaDataset with its digest, profile and schema, named after
    its folder (or the source's kind)."""
    from mlflow.data.meta_dataset import MetaDataset

    class IndexDataset(MetaDataset):  # MetaDataset has no profile; the run page shows this one
        def __init__(self, profile: dict, **kw):
            self._profile = profile
            super().__init__(**kw)

        @property
        def profile(self):
            return self._profile

        def to_dict(self) -> dict[str, str]:
            return {**super().to_dict(), "profile": json.dumps(self._profile)}

    uri, where, _ = split_files(idx, split)
    n = len(idx.train_ids if split == "train" else idx.eval_ids)
    profile = {"num_rows": n, "num_classes": idx.num_classes, "source_kind": idx.kind}
    if uri and not isinstance(where, str):
        profile["num_files"] = len(where)
    name = uri.rstrip("/").rsplit("/", 1)[-1] if uri else idx.kind.rsplit(":", 1)[-1]
    return IndexDataset(profile, source=_source(uri, idx.kind), name=name,
                        digest=split_digest(idx, split), schema=_schema(idx))


def _source(uri: str | None, kind: str):
    from mlflow.data.code_dataset_source import CodeDatasetSource
    from mlflow.data.dataset_source_registry import resolve_dataset_source

    if uri:
        try:
            with warnings.catch_warnings():  # "can be interpreted in multiple ways": two local sources
                warnings.simplefilter("ignore", UserWarning)
                return resolve_dataset_source(uri)
        except Exception:  # noqa: BLE001 - a scheme MLflow has no dataset source for: name it in a tag
            return CodeDatasetSource({"uri": uri})
    return CodeDatasetSource({"echoray.source.kind": kind})


def _schema(idx: SourceIndex):
    from mlflow.types import Schema, TensorSpec

    if idx.kind == "text":
        row = idx.details["seq_len"] + 1
        return Schema([TensorSpec(np.dtype(np.int64), (-1, row), "tokens")])
    side = idx.image_size or -1
    return Schema([TensorSpec(np.dtype(np.uint8), (-1, side, side, idx.channels), "image"),
                   TensorSpec(np.dtype(np.int64), (-1,), "label")])


# What a store says when two runs of one experiment insert one dataset at once (SQLite,
# PostgreSQL, MySQL): MLflow looks the row up, then inserts it; the later insert fails.
LOST_INSERT_RACE = ("UNIQUE constraint failed: datasets", "duplicate key value violates unique constraint",
                    "Duplicate entry")
LOG_ATTEMPTS = 3


def lost_insert_race(exc: Exception) -> bool:
    """Whether `exc` is the store refusing a dataset row another run inserted first."""
    return any(s in str(exc) for s in LOST_INSERT_RACE)


def log_datasets(client, run_id: str, idx: SourceIndex) -> None:
    """Log both splits as the run's dataset inputs (MLflow keeps one row per experiment, name
    and digest: a resumed run on unchanged data adds nothing). Two runs logging one dataset
    at once (a search's trials starting together) race in MLflow's store; the loser's call
    is made again and finds the row (seen on `mlflow server` with SQLite, 1 search in 14)."""
    from mlflow.entities import DatasetInput, InputTag
    from mlflow.exceptions import MlflowException
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    inputs = [DatasetInput(split_dataset(idx, split)._to_mlflow_entity(),
                           tags=[InputTag(MLFLOW_DATASET_CONTEXT, context)])
              for split, context in CONTEXTS.items()]
    for attempt in range(LOG_ATTEMPTS):
        try:
            client.log_inputs(run_id, datasets=inputs)
            return
        except MlflowException as exc:
            if attempt == LOG_ATTEMPTS - 1 or not lost_insert_race(exc):
                raise
