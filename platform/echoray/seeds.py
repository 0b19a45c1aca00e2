"""Counter-based seeds: every random decision is a pure function of integers.

A key is splitmix64 of its parts, so it is the same whichever actor, batch or
worker computes it. That makes augmentation reproducible per sample (the audit's
`aug_key` fully determines the augmentation) and lets workers derive shared or
distinct seeds without talking to each other.
"""

from __future__ import annotations

import numpy as np

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def splitmix64(x: np.ndarray | int) -> np.ndarray:
    """The splitmix64 finaliser, vectorised over uint64 (wrapping arithmetic)."""
    z = np.asarray(x).astype(np.uint64)
    with np.errstate(over="ignore"):
        z = z + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def mix(*parts: np.ndarray | int) -> np.ndarray:
    """Hash several integer arrays (broadcast together) into one uint64 key."""
    arrays = np.broadcast_arrays(*[np.asarray(p).astype(np.uint64) for p in parts])
    h = np.zeros(arrays[0].shape, dtype=np.uint64)
    for a in arrays:
        h = splitmix64(h ^ a)
    return h


def to_int63(key: np.ndarray) -> np.ndarray:
    """uint64 -> non-negative int64, for Arrow/Parquet columns and torch."""
    return (np.asarray(key, dtype=np.uint64) >> np.uint64(1)).astype(np.int64)


def uniform(key: np.ndarray, stream: int) -> np.ndarray:
    """A float64 in [0, 1) per key, independent for each `stream` number."""
    bits = mix(key, stream) >> np.uint64(11)
    return bits.astype(np.float64) * (1.0 / (1 << 53))


def derive_seed(*parts: int) -> int:
    """A single int seed (for numpy/torch generators) from integer parts."""
    return int(to_int63(mix(*[np.int64(p) for p in parts])))


# Stream tags keep independent decisions apart (echo draws vs augmentation vs plans).
STREAM_PLAN = 1
STREAM_ECHO = 2
STREAM_AUGMENT = 3
STREAM_SAMPLER = 4
STREAM_MODEL = 5
STREAM_BATCH_ECHO = 6
