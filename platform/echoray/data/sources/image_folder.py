"""Class-per-folder images (JPEG/PNG): `root/<class>/<file>`, like torchvision's ImageFolder.

The held-out split is `source.eval_path` (same class folders) when given, otherwise
a fixed fraction of the training files.
"""

from __future__ import annotations

import numpy as np
import pyarrow.fs as pafs

from echoray.config import SourceConfig
from echoray.data.decode import decode_one, stack_same_size
from echoray.data.plan import split_holdout
from echoray.data.sources.base import SourceError, SourceIndex, Split, filesystem, require_dir

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


def index(cfg: SourceConfig) -> SourceIndex:
    fs, root = filesystem(cfg.path)
    classes, files, labels = _scan(fs, root, "source.path", None)
    if cfg.eval_path:
        efs, eroot = filesystem(cfg.eval_path)
        _, efiles, elabels = _scan(efs, eroot, "source.eval_path", classes)
        train_ids = np.arange(len(files), dtype=np.int64)
        eval_ids = np.arange(len(efiles), dtype=np.int64)
    else:
        efiles, elabels = files, labels
        train_ids, eval_ids = split_holdout(len(files), cfg.holdout_fraction, SPLIT_SEED)
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
            "train": (files, labels),
            "eval": (efiles, elabels),
        },
        max_bad_fraction=cfg.max_bad_fraction,
    )


class ImageFolderReader:
    def __init__(self, idx: SourceIndex):
        self.idx = idx
        self.fs = {s: filesystem(idx.details[k])[0] for s, k in (("train", "uri"), ("eval", "eval_uri"))}

    def read(self, ids: np.ndarray, split: Split) -> tuple[np.ndarray, np.ndarray]:
        files, labels = self.idx.details[split]
        fs = self.fs[split]
        images, names = [], []
        for i in np.asarray(ids, dtype=np.int64):
            with fs.open_input_file(files[i]) as f:
                data = f.read()
            images.append(decode_one(data, self.idx.image_size, 3, files[i]))
            names.append(files[i])
        return stack_same_size(images, names), labels[np.asarray(ids, dtype=np.int64)]
