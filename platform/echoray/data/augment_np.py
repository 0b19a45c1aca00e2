"""The pixel-exact augmentation ops in numpy, for the CPU preprocessing actors.

A preprocessing actor that applies a crop, flip or cutout with the torch ops of
data/augment.py imports torch in its constructor: 1.4 s of a fresh actor's start on this
2-core machine, and every run and every search trial starts a fresh actor (Ray Data
makes a new pool per dataset), on the path to its first batch. These three ops only
move and blank uint8 pixels at positions drawn from the samples' keys, so numpy gives
the same bytes: each position is the same float32 uniform times the same float32 bound,
truncated (tests/unit/test_augment.py compares every op and their chains with the torch
versions). random_resized_crop interpolates (torchvision's roi_align) and stays on torch:
a pipeline with it uses data/augment.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from echoray.config import AugmentOp
from echoray.data import ops as ops_custom
from echoray.plugins import is_import_path
from echoray.seeds import mix, uniform

# random_resized_crop's area fraction and aspect ratio ranges (Inception's, torchvision's defaults);
# other ranges: an op class by import path (data/ops.py).
CROP_SCALE = (0.08, 1.0)
CROP_RATIO = (3 / 4, 4 / 3)


def _u(keys: np.ndarray, op_index: int, component: int) -> np.ndarray:
    """data/augment.py's `_u`: the float64 uniform rounded to float32, as torch does."""
    return uniform(mix(keys, op_index), component).astype(np.float32)


def random_crop(x: np.ndarray, keys: np.ndarray, i: int, padding: int) -> np.ndarray:
    if padding == 0:
        return x
    n, h, w, _ = x.shape
    padded = np.pad(x, ((0, 0), (padding, padding), (padding, padding), (0, 0)))
    oy = (_u(keys, i, 0) * np.float32(2 * padding + 1)).astype(np.int64)
    ox = (_u(keys, i, 1) * np.float32(2 * padding + 1)).astype(np.int64)
    rows = oy[:, None] + np.arange(h)
    cols = ox[:, None] + np.arange(w)
    return padded[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]


def flip_mask(keys: np.ndarray, i: int, p: float) -> np.ndarray:
    """Which images op i (a flip with probability p) mirrors."""
    return _u(keys, i, 0) < np.float32(p)


def flip(x: np.ndarray, keys: np.ndarray, i: int, p: float) -> np.ndarray:
    mask = flip_mask(keys, i, p)
    return np.where(mask[:, None, None, None], x[:, :, ::-1], x)


def cutout(x: np.ndarray, keys: np.ndarray, i: int, size: int) -> np.ndarray:
    n, h, w, _ = x.shape
    cy = (_u(keys, i, 0) * np.float32(h)).astype(np.int64)
    cx = (_u(keys, i, 1) * np.float32(w)).astype(np.int64)
    half = size // 2
    ys, xs = np.arange(h)[None, :], np.arange(w)[None, :]
    in_y = (ys >= (cy - half)[:, None]) & (ys < (cy - half + size)[:, None])
    in_x = (xs >= (cx - half)[:, None]) & (xs < (cx - half + size)[:, None])
    hole = in_y[:, :, None] & in_x[:, None, :]
    return np.where(hole[..., None], np.zeros((), x.dtype), x)


def crop_draws(keys: np.ndarray, i: int, scale: Sequence[float], ratio: Sequence[float]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The parts of random_resized_crop's boxes that depend on the keys alone (area share,
    aspect ratio, two position uniforms), so an actor draws them once per batch and
    `boxes_from_draws` places each image's box once its size is known (the header)."""
    u = [uniform(mix(keys, i), c) for c in range(4)]
    share = scale[0] + u[0] * (scale[1] - scale[0])
    r = np.exp(np.log(ratio[0]) + u[1] * (np.log(ratio[1]) - np.log(ratio[0])))
    return share, r, u[2], u[3]


def boxes_from_draws(draws: tuple[np.ndarray, ...], w: np.ndarray | int, h: np.ndarray | int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x0, y0, cw, ch) of crop_draws' boxes in w x h images (see crop_boxes)."""
    share, r, u2, u3 = draws
    w, h = np.asarray(w, np.float64), np.asarray(h, np.float64)
    area = share * (w * h)
    cw = np.clip(np.sqrt(area * r), 1, w)
    ch = np.clip(np.sqrt(area / r), 1, h)
    return u2 * (w - cw), u3 * (h - ch), cw, ch


def crop_boxes(keys: np.ndarray, i: int, w: np.ndarray | int, h: np.ndarray | int, scale: Sequence[float],
               ratio: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """random_resized_crop's boxes (x0, y0, cw, ch) in pixels of each w x h source image:
    area a uniform share of the image in `scale`, log-uniform aspect ratio in `ratio`,
    clamped to the image, uniform position. A pure function of the keys, so the actor's
    per-image crop of a full decode (data/full_crop.py) and the batched torch op
    (data/augment.py) cut the same box. Here, in numpy, so an actor that crops photos
    never imports torch (1.4 s of its start, on the path to the first batch)."""
    return boxes_from_draws(crop_draws(keys, i, scale, ratio), w, h)


OPS: dict[str, Callable[[np.ndarray, np.ndarray, int, AugmentOp], np.ndarray]] = {
    "random_crop": lambda x, keys, i, op: random_crop(x, keys, i, op.padding),
    "flip": lambda x, keys, i, op: flip(x, keys, i, op.p),
    "cutout": lambda x, keys, i, op: cutout(x, keys, i, op.size),
}


def handles(ops: Sequence[AugmentOp], first: int = 0) -> bool:
    """Whether every op from `first` on has a numpy version here (ops by import path do: data/ops.py)."""
    return all(op.op in OPS or is_import_path(op.op) for op in ops[first:])


def checked_keys(keys: np.ndarray, n_images: int) -> np.ndarray:
    """The samples' augmentation keys as uint64, one per image (both ops modules)."""
    keys = np.asarray(keys, dtype=np.uint64)
    if len(keys) != n_images:
        raise ValueError(f"{len(keys)} keys for {n_images} images")
    return keys


def augment_batch(x: np.ndarray, keys: np.ndarray, ops: Sequence[AugmentOp], first: int = 0) -> np.ndarray:
    """data/augment.py's augment_batch on a uint8 N x H x W x C array (ops it `handles`)."""
    keys = checked_keys(keys, x.shape[0])
    for i, op in enumerate(ops):
        if i >= first:
            x = OPS[op.op](x, keys, i, op) if op.op in OPS else ops_custom.apply_numpy(x, keys, i, op)
    return np.ascontiguousarray(x)
