"""A reader of your own for `source.kind: "my_reader:NumpyReader"` (examples/my_reader.yaml).

The dataset: a folder with images.npy (uint8 N x H x W x C) and labels.npy (integers N),
read through memory maps, so an actor touches only the rows of the chunks it reads.
echoray gives it the read plan (seeded order per epoch, chunks of source.chunk_size ids),
reads in flight, replay of a restored run's unread rows and the exact accounting
by sample id, as for a built-in source. `python examples/my_reader.py OUT` writes
scikit-learn's digits (1,797 8x8 images) in this format.

The protocol: index(cfg) once on the driver -> a SourceIndex (plain picklable data: the
ids and what read needs); __init__(idx) on every actor and evaluating worker;
read(ids, split) -> (images uint8 N x H x W x C, labels int64 N) in the order of ids.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from echoray.data import SourceError, SourceIndex, split_holdout


class NumpyReader:
    @staticmethod
    def index(cfg) -> SourceIndex:
        """source.path: the folder; source.options.num_classes (default: largest label + 1)."""
        folder = Path(cfg.path or "")
        paths = {name: folder / f"{name}.npy" for name in ("images", "labels")}
        for path in paths.values():
            if not path.is_file():
                raise SourceError(f"source.path {folder}: no {path.name}")
        images = np.load(paths["images"], mmap_mode="r")
        labels = np.load(paths["labels"], mmap_mode="r")
        if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1] != images.shape[2]:
            raise SourceError(f"source.path {folder}: images.npy must be uint8 N x S x S x C, got "
                              f"{images.dtype} {images.shape}")
        if labels.shape != (len(images),):
            raise SourceError(f"source.path {folder}: labels.npy has {labels.shape}, want ({len(images)},)")
        train_ids, eval_ids = split_holdout(len(images), cfg.holdout_fraction, seed=0)
        return SourceIndex(
            kind="numpy", num_classes=int(cfg.options.get("num_classes", int(labels.max()) + 1)),
            train_ids=train_ids[: cfg.limit], eval_ids=eval_ids[: cfg.eval_limit],
            image_size=int(images.shape[1]), channels=int(images.shape[3]),
            details={name: str(path) for name, path in paths.items()})

    def __init__(self, idx: SourceIndex):
        self.images = np.load(idx.details["images"], mmap_mode="r")
        self.labels = np.load(idx.details["labels"], mmap_mode="r")

    def read(self, ids: np.ndarray, split: str) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.images[ids]), np.asarray(self.labels[ids], dtype=np.int64)


def write_digits(out: str | Path, side: int = 16) -> Path:
    """scikit-learn's digits, resized to side x side, as images.npy and labels.npy in `out`."""
    from echoray.data.decode import resize_batch
    from echoray.data.sources.digits import load_arrays

    images, labels = load_arrays()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "images.npy", resize_batch(images, side))
    np.save(out / "labels.npy", labels)
    return out


if __name__ == "__main__":
    print(write_digits(sys.argv[1] if len(sys.argv) > 1 else "digits-npy"))
