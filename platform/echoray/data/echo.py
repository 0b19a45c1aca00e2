"""The echo operator: repeat each upstream item e times (pure numpy, no Ray).

Non-integer factors: each item is emitted floor(e) + Bernoulli(e - floor(e))
times, the Bernoulli drawn per item from a key of (seed, epoch, sample_id), so
the expected count is exactly e and the draw does not depend on how Ray Data
happened to batch the rows. Copies are emitted next to each other; the
worker's shuffle buffer and batch packer (data/batching.py) spread them out.
The Ray Data side runs it inside the preprocessing actor (data/stages.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
    (exact fresh-example accounting, accounting/fresh.py)."""
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


# The auto controller's gain once past its first windows (runtime/auto_echo.py has the law).
# Measured on the 0.5 s windows of benchmarks/results/echo_R8.json (load average 10 to 15):
# log R per window has a standard deviation of 0.30 to 0.37 and lag-1 correlation up to
# 0.4. In a simulation with that noise (tests/unit/test_echo.py) gain 1/3 trains at 0.93
# of R = max_factor = 8 (gain 1/5: 0.94; the old half-way step with a 5% dead band on the
# clipped e: 0.88) and follows a halving of R to within 20% in a median of 4 windows (2 s;
# 90% within 9; gain 1/5: 6.5). The step rate loses where e < R, so the cap matters most.
AUTO_GAIN = 1 / 3


@dataclass(frozen=True)
class REstimate:
    """The auto controller's state: a smoothed log R over `windows` measurements.

    Unclipped on purpose: near echo.max_factor a state clipped to the cap only moves down
    (windows above the cap cannot push it up), so e sat below the cap on average."""
    log_r: float
    windows: int


def update_r_estimate(state: REstimate | None, measured_r: float, gain: float = AUTO_GAIN) -> REstimate | None:
    """One window's R into the estimate (pure): the mean of log R over the first windows
    (gain 1/n: the first sets it outright, nothing to smooth yet), then an exponential
    average with `gain`, so the estimate keeps following R, down as well as up.
    Log space: R is a ratio of rates, its noise multiplicative; a window at R / 2 and one
    at 2 R cancel. A window without a usable R (nothing measured) leaves the state as it is."""
    if not np.isfinite(measured_r) or measured_r <= 0:
        return state
    log_r = math.log(measured_r)
    if state is None:
        return REstimate(log_r, 1)
    n = state.windows + 1
    return REstimate(state.log_r + max(1 / n, gain) * (log_r - state.log_r), n)


def auto_factor(state: REstimate | None, max_factor: float) -> float:
    """The echo factor for an R estimate: R within [1, max_factor] (1 before any window)."""
    if state is None:
        return 1.0
    return float(np.clip(math.exp(state.log_r), 1.0, max_factor))
