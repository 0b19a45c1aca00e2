"""A file list that lives once per run: an Arrow table in Ray's object store.

ImageNet's 1.28 M paths as a Python list cost ~150 MB per process and were pickled
into every preprocessing actor, train worker and Ray Train's controller with the
SourceIndex. Here the driver keeps them as an Arrow table (paths relative to the
root: ~40 MB for ImageNet), `publish_index` puts it in the object store once,
and each reader `ray.get`s it on first use: Arrow columns come back zero-copy
from shared memory, so a node holds one copy however many processes read it, and
the object store (unlike the run folder) reaches every node of a cluster. Without
Ray (unit tests, a reader built by hand) the table itself travels.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa


class FileTable:
    """`root` + relative paths and int64 labels; picklable in O(1) once published."""

    def __init__(self, root: str, paths: list[str], labels: np.ndarray):
        self.root = root.rstrip("/")
        prefix = len(self.root) + 1
        self._table: pa.Table | None = pa.table({
            "path": pa.array([p[prefix:] for p in paths], pa.string()),
            "label": pa.array(np.asarray(labels, np.int64)),
        })
        self._ref = None
        self._n = self._table.num_rows

    def __len__(self) -> int:
        return self._n

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if self._ref is not None:
            state["_table"] = None  # readers fetch it from the object store
        return state

    def published(self) -> FileTable:
        """A copy whose pickle carries an object ref instead of the table (needs Ray)."""
        import ray

        out = FileTable.__new__(FileTable)
        out.__dict__.update(self.__dict__)
        out._ref = self._ref or ray.put(self._table)
        return out

    def table(self) -> pa.Table:
        if self._table is None:
            import ray

            self._table = ray.get(self._ref)
        return self._table

    def take(self, ids: np.ndarray) -> tuple[list[str], np.ndarray]:
        """Full paths and labels of `ids`, in their order."""
        t = self.table().take(pa.array(np.asarray(ids, np.int64)))
        rel = t.column("path").to_pylist()
        return [f"{self.root}/{p}" for p in rel], t.column("label").to_numpy()

    def paths(self) -> list[str]:
        return self.take(np.arange(self._n))[0]

    def labels(self) -> np.ndarray:
        return self.table().column("label").to_numpy()


def publish_index(idx):
    """The SourceIndex with every FileTable in its details put in the object store once."""
    details = {k: v.published() if isinstance(v, FileTable) else v for k, v in idx.details.items()}
    return dataclasses.replace(idx, details=details)
