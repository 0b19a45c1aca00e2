"""Quasi-random search points: scrambled Halton/Sobol from scipy.stats.qmc, mapped onto
the pipeline's `search.space`. Pure functions, no Ray.

Point k of a search is (repeat, index) = divmod(k, trials); each repeat draws its
own scrambled sequence (scramble seed derived from the pipeline seed and the
repeat), so repeats are independent searches, as in the data-echoing paper, and
every point is a pure function of (seed, repeat, index).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.stats import qmc

from echoray.config import SearchConfig, SearchParam
from echoray.seeds import derive_seed

STREAM_SEARCH = 7
SEQUENCE = "halton"  # scrambled, from scipy.stats.qmc (the data-echoing paper's)


def unit_to_value(param: SearchParam, u: float) -> Any:
    """Map u in [0, 1) onto one search dimension."""
    if param.choices is not None:
        return param.choices[min(int(u * len(param.choices)), len(param.choices) - 1)]
    if param.scale == "log":
        v = math.exp(math.log(param.low) + u * (math.log(param.high) - math.log(param.low)))
    else:
        v = param.low + u * (param.high - param.low)
    return 1.0 - v if param.one_minus else v


def unit_points(sequence: str, dims: int, count: int, seed: int) -> np.ndarray:
    """`count` scrambled low-discrepancy points in [0, 1)^dims."""
    engine = (qmc.Halton(d=dims, scramble=True, seed=seed) if sequence == "halton"
              else qmc.Sobol(d=dims, scramble=True, seed=seed))
    if sequence == "sobol":
        # Sobol is balanced at powers of two; draw the next one up and keep a prefix.
        return engine.random_base2(max(0, math.ceil(math.log2(count))))[:count]
    return engine.random(count)


class SearchPoints:
    """All trials x repeats points of one search, in a fixed order."""

    def __init__(self, search: SearchConfig, seed: int, trials: int | None = None, repeats: int | None = None,
                 sequence: str = SEQUENCE):
        if not search.space:
            raise ValueError("search.space is empty: add at least one key to search over")
        self.space = dict(sorted(search.space.items()))  # fixed dimension order
        self.trials = trials or search.trials
        self.repeats = repeats or search.repeats
        self.sequence = sequence
        self.seed = seed
        self._units = [unit_points(self.sequence, len(self.space), self.trials, self.scramble_seed(r))
                       for r in range(self.repeats)]

    def scramble_seed(self, repeat: int) -> int:
        return derive_seed(self.seed, STREAM_SEARCH, repeat)

    def __len__(self) -> int:
        return self.trials * self.repeats

    def unit(self, k: int) -> np.ndarray:
        repeat, index = divmod(k, self.trials)
        return self._units[repeat][index]

    def point(self, k: int) -> dict[str, Any]:
        """{"repeat", "index", "params": {dotted key: value}} for point k."""
        if not 0 <= k < len(self):
            raise IndexError(f"point {k} outside a search of {len(self)} points")
        repeat, index = divmod(k, self.trials)
        params = {key: _plain(unit_to_value(p, float(u)))
                  for (key, p), u in zip(self.space.items(), self.unit(k), strict=True)}
        return {"repeat": repeat, "index": index, "params": params}


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v
