"""Checkpoints of a run in Ray Train's local mode, kept where a worker group's would be:
the run's storage, a folder or an object store URI (train/local_fit.py says why: local
mode's report keeps a checkpoint in memory only). A worker group's controller keeps its
checkpoints and a snapshot that names the latest; this store does the same in a few lines:

    <storage>/train_local/checkpoint_000001/   the files of recovery/checkpoint.py write
    <storage>/train_local/checkpoints.json     the kept ones, oldest first, with metrics

A checkpoint counts once the index names it: the folder is uploaded first, the index
written after, so a driver killed mid-upload leaves an unlisted folder that the next
save of that number replaces. The oldest beyond `keep` are deleted after the index no
longer names them. Checkpoints come back as `ray.train.Checkpoint`s (path and pyarrow
filesystem), the type the worker loop restores from either way.

An object store that stops answering (or answers 5xx) is waited out for TrainConfig.store_retry_s
(echoray/storage/retry.py) at each step of a save: reading the index, the upload (redone
whole: the folder is cleared first), the index write, the deletion of dropped ones.
Past it the save raises StoreUnavailable naming the URI; the index still names only the
checkpoints before the outage, so `--resume` continues from the last of them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from echoray.storage.fs import open_location, upload_folder
from echoray.storage.retry import RetryPolicy, Transient

DIR = "train_local"
INDEX = "checkpoints.json"


class CheckpointStore:
    def __init__(self, storage: str, keep: int | None, retry_s: float = 0.0):
        """`keep`: how many checkpoints stay (None: all, as with the audit on); `retry_s`:
        TrainConfig.store_retry_s (0: a failed request fails the save at once)."""
        self.fs, base = open_location(storage, "train.storage_path")
        self.root = f"{base.rstrip('/')}/{DIR}"
        self.keep = keep
        self.retry = RetryPolicy(retry_s)
        self.where = f"train.storage_path {storage.rstrip('/')}/{DIR}"

    def kept(self) -> list[dict[str, Any]]:
        """The index: [{"name", "epoch", "steps", ...}], oldest first ([] before the first)."""
        path = f"{self.root}/{INDEX}"
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            return []
        with self.fs.open_input_stream(path) as f:
            return json.loads(f.read())

    def checkpoint(self, name: str):
        import ray.train

        return ray.train.Checkpoint(f"{self.root}/{name}", filesystem=self.fs)

    def latest(self):
        """The newest kept checkpoint, or None."""
        kept = self.kept()
        return self.checkpoint(kept[-1]["name"]) if kept else None

    def save(self, metrics: dict[str, Any], local_dir: Path):
        """Upload `local_dir` (then removed) as the next checkpoint; returns it."""
        try:
            kept = self.retry.call(self.kept, self.where)
            number = int(kept[-1]["name"].rsplit("_", 1)[1]) + 1 if kept else 1
            name = f"checkpoint_{number:06d}"
            self.retry.call(lambda: self._upload(local_dir, f"{self.root}/{name}"), f"{self.where}/{name}")
        finally:
            shutil.rmtree(local_dir, ignore_errors=True)
        kept.append({"name": name, **metrics})
        dropped = kept[:-self.keep] if self.keep else []
        self.retry.call(lambda: self._write_index(kept[len(dropped):]), f"{self.where}/{INDEX}")
        for old in dropped:
            self.retry.call(lambda old=old: self.fs.delete_dir(f"{self.root}/{old['name']}"),
                            f"{self.where}/{old['name']}")
        return self.checkpoint(name)

    def _upload(self, local_dir: Path, dest: str) -> None:
        # A save of this number that never reached the index (or a try cut short) is replaced.
        if self.fs.get_file_info(dest).type != pafs.FileType.NotFound:
            self.fs.delete_dir(dest)
        upload_folder(self.fs, local_dir, dest)
        self._check_upload(local_dir, dest)

    def _check_upload(self, local_dir: Path, dest: str) -> None:
        """Every file of `local_dir` is at `dest` with its size, or Transient (the upload is
        redone). A request a frozen store held while its client gave up can still land (or
        delete) once the store resumes: the index names a checkpoint only once it is whole."""
        want = {str(p.relative_to(local_dir)): p.stat().st_size for p in local_dir.rglob("*") if p.is_file()}
        infos = self.fs.get_file_info(pafs.FileSelector(dest, recursive=True))
        have = {i.path[len(dest) + 1:]: i.size for i in infos if i.type == pafs.FileType.File}
        bad = sorted(k for k in want if have.get(k) != want[k])
        if bad:
            raise Transient(f"{dest}: upload incomplete ({len(bad)} file(s) missing or short: {bad[:3]})")

    def _write_index(self, kept: list[dict[str, Any]]) -> None:
        # One object write: whole on an object store; on a local disk through a rename.
        data = json.dumps(kept, indent=1).encode()
        path = f"{self.root}/{INDEX}"
        if isinstance(self.fs, pafs.LocalFileSystem):
            tmp = path + ".tmp"
            with self.fs.open_output_stream(tmp) as f:
                f.write(data)
            self.fs.move(tmp, path)
        else:
            with self.fs.open_output_stream(path) as f:
                f.write(data)
