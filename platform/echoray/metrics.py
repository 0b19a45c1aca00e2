"""The held-out metric of a run and its direction, in one place.

`train.metric` names it; everything that compares values (the loop's target check
and best value, summary.json, Tune's trial lines, the study report) asks the
Metric: accuracy is reached from below (value >= target), bits per byte and
perplexity from above (value <= target).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    higher_is_better: bool
    label: str  # how epoch lines and plots name it

    @property
    def worst(self) -> float:
        return -math.inf if self.higher_is_better else math.inf

    def reached(self, value: float, target: float | None) -> bool:
        if target is None or value is None or math.isnan(value):
            return False
        return value >= target if self.higher_is_better else value <= target

    def better(self, a: float, b: float) -> float:
        """The better of two values (a NaN never wins)."""
        if b is None or math.isnan(b):
            return a
        if a is None or math.isnan(a):
            return b
        return max(a, b) if self.higher_is_better else min(a, b)

    @property
    def direction(self) -> str:
        return "higher is better" if self.higher_is_better else "lower is better"

    @property
    def mode(self) -> str:
        """Ray Tune's name of the direction."""
        return "max" if self.higher_is_better else "min"


METRICS = {
    "accuracy": Metric("accuracy", True, "acc"),
    "bits_per_byte": Metric("bits_per_byte", False, "bpb"),
    "perplexity": Metric("perplexity", False, "ppl"),
}


def metric_named(name: str) -> Metric:
    return METRICS[name]
