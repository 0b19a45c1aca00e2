"""The held-out split read and decoded: a share of it as uint8 centre crops, without torch.

`HeldOutReader(idx, rank, world, out_size)` reads the eval ids rank::world in chunks of
READ_CHUNK straight from the source reader (JPEGs decoded at the DCT scale the crop
needs) and yields (uint8 centre crops N x out_size x out_size x C, labels, sample ids)
in eval-id order. Undecodable files are skipped and named in `bad`, up to
source.max_bad_fraction of the share; past it, SourceError. `decode()` gives the whole
share as a `HeldOut` record where its crops fit CACHE_LIMIT_BYTES (1 GiB: ImageNet's
50,000 validation images at 224x224 on 8 workers are 940 MB each), else None: such a
share is re-read in chunks at every evaluation.

A run's evaluation (train/evaluate.py EvalSet) keeps the record for every later epoch,
and a search group's hub (tune/share_hub.py) decodes it once for all the group's trials.
It lives apart from the evaluation, which needs torch, so that the hub does not import
torch for a split it only decodes and puts in the object store: importing the hub and
this module takes 0.96 CPU-seconds and 112 MB of resident memory, and the hub's old
path through train/evaluate.py 2.03 CPU-seconds and 579 MB (one process each, warm
file cache; torch's shared libraries are most of the memory).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from echoray.data.sources import SourceError, SourceIndex, open_reader
from echoray.data.sources.base import read_skipping

CACHE_LIMIT_BYTES = 1 << 30
READ_CHUNK = 512

Chunk = tuple[np.ndarray, np.ndarray, np.ndarray]  # uint8 crops, labels, sample ids


def center_crop(images: np.ndarray, size: int) -> np.ndarray:
    """The centre size x size of N x H x W x C images (a view; numpy or torch alike)."""
    h, w = images.shape[1:3]
    if (h, w) == (size, size):
        return images
    top, left = (h - size) // 2, (w - size) // 2
    return images[:, top : top + size, left : left + size]


@dataclass(frozen=True)
class HeldOut:
    """One share of the held-out split, decoded: chunks of (uint8 centre crops N x H x W
    x C, labels, sample ids) in eval-id order, and the files skipped as undecodable
    (sample id -> "name (reason)")."""

    chunks: tuple[Chunk, ...]
    bad: dict[int, str]

    @property
    def rows(self) -> int:
        return sum(len(labels) for _, labels, _ in self.chunks)


class HeldOutReader:
    """One share of the held-out split (see the module docstring)."""

    def __init__(self, idx: SourceIndex, rank: int, world: int, out_size: int | None):
        self.ids = idx.eval_ids[rank::world]
        self.reader = open_reader(idx)
        self.max_bad = int(idx.max_bad_fraction * len(self.ids))
        self.bad: dict[int, str] = {}  # undecodable held-out files: skipped, up to source.max_bad_fraction
        self.out_size = out_size
        per_image = (out_size or idx.image_size or 0) ** 2 * idx.channels  # what a kept crop holds
        self.fits = bool(per_image) and per_image * len(self.ids) <= CACHE_LIMIT_BYTES

    def chunks(self) -> Iterator[Chunk]:
        for start in range(0, len(self.ids), READ_CHUNK):
            ids = self.ids[start : start + READ_CHUNK]
            got = read_skipping(self.reader, ids, "eval")
            self.bad.update({sid: f"{name} ({reason})" for sid, name, reason in got.bad})
            if len(self.bad) > self.max_bad:
                raise SourceError(f"{len(self.bad)} undecodable held-out image(s), more than source.max_bad_fraction "
                                  f"allows ({self.max_bad}): " + "; ".join(list(self.bad.values())[:5]))
            # contiguous: a kept crop holds out_size^2 pixels, not the decoded image's
            yield np.ascontiguousarray(center_crop(got.images, self.out_size)), got.labels, ids[got.kept]

    def decode(self) -> HeldOut | None:
        """The whole share, decoded (None: over CACHE_LIMIT_BYTES, nothing is read)."""
        if not self.fits:
            return None
        chunks = tuple(self.chunks())
        return HeldOut(chunks, dict(self.bad))
