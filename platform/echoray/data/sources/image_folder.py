"""Class-per-folder images (JPEG/PNG): `root/<class>/<file>`, like torchvision's ImageFolder.

The held-out split is `source.eval_path` (same class folders) when given, otherwise
a fixed fraction of the training files.
"""

from __future__ import annotations

import numpy as np
import pyarrow.fs as pafs

from echoray.config import SourceConfig
from echoray.data.decode import (
    collect,
    decode_guarded,
    default_decoder,
    mixed_sizes_message,
    stack_images,
)
from echoray.data.plan import split_holdout
from echoray.data.sources.base import (
    ReadResult,
    SourceError,
    SourceIndex,
    Split,
    filesystem,
    require_dir,
)
from echoray.data.sources.concurrent import ConcurrentReads
from echoray.data.sources.file_table import FileTable

EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
SPLIT_SEED = 0


def _scan(fs: pafs.FileSystem, root: str, key: str, classes: list[str] | None):
    require_dir(fs, root, key)
    entries = fs.get_file_info(pafs.FileSelector(root, recursive=False))
    found = sorted(e.base_name for e in entries if e.type == pafs.FileType.Directory)
    if classes is None:
        classes = found
    if not classes:
        raise SourceError(f"{key} {root}: no class folders (expected root/<class>/<image>)")
    unknown = sorted(set(found) - set(classes))
    if unknown:
        raise SourceError(f"{key} {root}: class folders {unknown} are not in the training classes")
    files, labels = [], []
    for label, name in enumerate(classes):
        sel = pafs.FileSelector(f"{root}/{name}", recursive=True, allow_not_found=True)
        paths = sorted(
            i.path for i in fs.get_file_info(sel)
            if i.type == pafs.FileType.File and i.path.lower().endswith(EXTENSIONS)
        )
        files += paths
        labels += [label] * len(paths)
    if not files:
        raise SourceError(f"{key} {root}: no image files ({', '.join(EXTENSIONS)})")
    return classes, files, np.asarray(labels, dtype=np.int64)


def _check_one_size(fs: pafs.FileSystem, files: list[str], seen: dict[tuple[int, int], str]) -> None:
    """Without source.image_size every image must have one size: read each header up
    front (a few KB per file) rather than fail in the middle of the first epoch."""
    from PIL import Image, UnidentifiedImageError

    for path in files:
        try:
            with fs.open_input_file(path) as f, Image.open(f) as img:
                seen.setdefault(img.size, path)
        except (UnidentifiedImageError, OSError, ValueError):
            continue  # undecodable: counted against source.max_bad_fraction when read
        if len(seen) > 1:
            listed = ", ".join(f"{p} is {w}x{h}" for (w, h), p in seen.items())
            raise SourceError(mixed_sizes_message(listed))


def index(cfg: SourceConfig) -> SourceIndex:
    fs, root = filesystem(cfg.path)
    classes, files, labels = _scan(fs, root, "source.path", None)
    if cfg.eval_path:
        efs, eroot = filesystem(cfg.eval_path, "source.eval_path")
        _, efiles, elabels = _scan(efs, eroot, "source.eval_path", classes)
        train_ids = np.arange(len(files), dtype=np.int64)
        eval_ids = np.arange(len(efiles), dtype=np.int64)
    else:
        efiles, elabels = files, labels
        train_ids, eval_ids = split_holdout(len(files), cfg.holdout_fraction, SPLIT_SEED)
    if cfg.image_size is None:
        seen: dict[tuple[int, int], str] = {}
        _check_one_size(fs, files, seen)
        if cfg.eval_path:
            _check_one_size(efs, efiles, seen)
    return SourceIndex(
        kind="image_folder",
        num_classes=len(classes),
        train_ids=train_ids[: cfg.limit],
        eval_ids=eval_ids[: cfg.eval_limit],
        image_size=cfg.image_size,
        channels=3,
        details={
            "uri": cfg.path,
            "eval_uri": cfg.eval_path or cfg.path,
            "classes": classes,
            "train": FileTable(root, files, labels),
            "eval": FileTable(eroot if cfg.eval_path else root, efiles, elabels),
        },
        max_bad_fraction=cfg.max_bad_fraction,
        shuffled_reads=True,  # one file per sample: chunks are random draws (data/plan.py)
    )


class ImageFolderReader:
    """Reads and decodes each file in a pool thread, `read_concurrency` files in flight."""

    def __init__(self, idx: SourceIndex):
        self.idx = idx
        self.fs = {s: filesystem(idx.details[k])[0] for s, k in (("train", "uri"), ("eval", "eval_uri"))}
        self.pool = ConcurrentReads(idx.read_concurrency)

    def read(self, ids: np.ndarray, split: Split) -> tuple[np.ndarray, np.ndarray]:
        r = self._read(ids, split, skip_bad=False)
        return r.images, r.labels

    def read_skipping(self, ids: np.ndarray, split: Split, decoder=None, ragged: bool = False) -> ReadResult:
        return self._read(ids, split, skip_bad=True, decoder=decoder, ragged=ragged)

    def _read(self, ids: np.ndarray, split: Split, skip_bad: bool, decoder=None, ragged: bool = False) -> ReadResult:
        ids = np.asarray(ids, dtype=np.int64)
        files, labels = self.idx.details[split].take(ids)
        fs = self.fs[split]
        decoder = decoder or default_decoder(self.idx.image_size, 3)

        def fetch_decode(pos: int, path: str):
            with fs.open_input_file(path) as f:
                data = f.read()
            return decode_guarded(decoder, pos, data, path)

        results = self.pool.map(fetch_decode, range(len(ids)), files)
        arrays, names, kept, bad = collect(results, ids, files, skip_bad)
        images = stack_images(arrays, names, self.idx.image_size, ragged=ragged)
        return ReadResult(images, labels[kept], kept, bad)
