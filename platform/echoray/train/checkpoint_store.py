"""Checkpoints of a run trained in the driver's process (train/in_process.py), kept
where Ray Train would keep them: the run's storage, a folder or an object store URI.

Ray Train keeps its checkpoints and a snapshot that names the latest; a run trained in
process has no Ray Train, so this store does the same in a few lines:

    <storage>/train_in_process/checkpoint_000001/   the files of train/checkpoint.py write
    <storage>/train_in_process/checkpoints.json     the kept ones, oldest first, with metrics

A checkpoint counts once the index names it: the folder is uploaded first, the index
written after, so a driver killed mid-upload leaves an unlisted folder that the next
save of that number replaces. The oldest beyond `keep` are deleted after the index no
longer names them. Checkpoints come back as `ray.train.Checkpoint`s (path and pyarrow
filesystem), the type the worker loop restores from in either trainer.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from echoray.storage import open_location

DIR = "train_in_process"
INDEX = "checkpoints.json"


class CheckpointStore:
    def __init__(self, storage: str, keep: int | None):
        """`keep`: how many checkpoints stay (None: all, as with the audit on)."""
        self.fs, base = open_location(storage, "train.storage_path")
        self.root = f"{base.rstrip('/')}/{DIR}"
        self.keep = keep

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
        kept = self.kept()
        number = int(kept[-1]["name"].rsplit("_", 1)[1]) + 1 if kept else 1
        name = f"checkpoint_{number:06d}"
        dest = f"{self.root}/{name}"
        try:
            if self.fs.get_file_info(dest).type != pafs.FileType.NotFound:
                self.fs.delete_dir(dest)  # a save of this number that never reached the index
            self.fs.create_dir(dest)
            pafs.copy_files(str(local_dir), dest, source_filesystem=pafs.LocalFileSystem(),
                            destination_filesystem=self.fs)
        finally:
            shutil.rmtree(local_dir, ignore_errors=True)
        kept.append({"name": name, **metrics})
        dropped = kept[:-self.keep] if self.keep else []
        self._write_index(kept[len(dropped):])
        for old in dropped:
            self.fs.delete_dir(f"{self.root}/{old['name']}")
        return self.checkpoint(name)

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
