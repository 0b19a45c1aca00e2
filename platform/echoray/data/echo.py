"""The echo operator: repeat each upstream item e times (pure numpy, no Ray).

Non-integer factors: each item is emitted floor(e) + Bernoulli(e - floor(e))
times, the Bernoulli drawn per item from a key of (seed, epoch, sample_id), so
the expected count is exactly e and the draw does not depend on how Ray Data
happened to batch the rows. Copies are emitted next to each other; the
worker's shuffle buffer and batch packer (train/batching.py) spread them out.
The Ray Data side runs it inside the preprocessing actor (data/stages.py).
"""

from __future__ import annotations

import math

import numpy as np

from echoray.seeds import STREAM_BATCH_ECHO, STREAM_ECHO, mix, uniform


def copy_counts(keys: np.ndarray, factor: float) -> np.ndarray:
    """floor(e) + Bernoulli(frac(e)) per key (int64)."""
    if not factor >= 1 or math.isinf(factor):
        raise ValueError(f"echo factor must be a finite number >= 1, got {factor}")
    base = math.floor(factor)
    frac = factor - base
    counts = np.full(len(keys), base, dtype=np.int64)
    if frac > 0:
        counts += (uniform(keys, STREAM_ECHO) < frac).astype(np.int64)
    return counts


def echo_keys(seed: int, epoch: np.ndarray, sample_id: np.ndarray) -> np.ndarray:
    return mix(seed, STREAM_ECHO, epoch, sample_id)


def echo_rows(batch: dict[str, np.ndarray], factor: float, seed: int) -> dict[str, np.ndarray]:
    """Repeat every row of a column batch; sets `echo_copy` = 0..count-1 per item and
    `echo_copies` = count, so a worker knows when it has trained an item's last copy
    (exact fresh-example accounting, train/fresh.py)."""
    n = len(batch["sample_id"])
    if factor == math.floor(factor):  # integer e: no draws needed
        e = int(factor)
        if e == 1:
            return {**batch, "echo_copies": np.ones(n, dtype=np.int64)}
        out = {k: np.repeat(v, e, axis=0) for k, v in batch.items()}
        out["echo_copy"] = np.tile(np.arange(e, dtype=np.int64), n)
        out["echo_copies"] = np.full(n * e, e, dtype=np.int64)
        return out
    counts = copy_counts(echo_keys(seed, batch["epoch"], batch["sample_id"]), factor)
    out = {k: np.repeat(v, counts, axis=0) for k, v in batch.items()}
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    out["echo_copy"] = (np.arange(int(counts.sum())) - starts).astype(np.int64)
    out["echo_copies"] = np.repeat(counts, counts)
    return out


def batch_repeats(seed: int, batch_index: int, factor: float) -> int:
    """How many times batch echoing repeats the batch_index-th batch (same fractional rule).

    Not keyed by worker: data-parallel workers must take the same number of steps.
    """
    key = mix(seed, STREAM_BATCH_ECHO, batch_index)[None]
    return int(copy_counts(key, factor)[0])


def next_auto_factor(current: float, measured_r: float, max_factor: float,
                     alpha: float = 0.5, deadband: float = 0.05, first: bool = False) -> float:
    """One step of `factor: auto` toward the measured R (pure).

    e moves a fraction alpha of the way to R, clipped to [1, max_factor]; changes
    under `deadband` (relative) are ignored so noise does not make e oscillate.
    first: the run's first measurement sets e to R at once (there is nothing to smooth
    yet, and every second at the start-up factor trains the run at the wrong e).
    """
    if not np.isfinite(measured_r) or measured_r <= 0:
        return current
    target = float(np.clip(measured_r, 1.0, max_factor))
    if first:
        return target
    if abs(target - current) <= deadband * current:
        return current
    return float(np.clip(current + alpha * (target - current), 1.0, max_factor))
