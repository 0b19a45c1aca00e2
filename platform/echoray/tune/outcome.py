"""Pure: from per-trial records to the search summary (the data-echoing paper's rule).

Per repeat, the best trial is the one that reached the target with the fewest fresh
examples. A trial that never reached the target is a failure, not a number: it is
listed, never averaged. Across repeats: mean, min and max of the best trials.
"""

from __future__ import annotations

import statistics
from typing import Any

REACHED, NOT_REACHED, ERROR = "reached", "not_reached", "error"


def best_of(trials: list[dict[str, Any]]) -> dict[str, Any] | None:
    hits = [t for t in trials if t["status"] == REACHED]
    if not hits:
        return None
    return min(hits, key=lambda t: (t["fresh_examples_to_target"], t["index"]))


def spread(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"mean": None, "min": None, "max": None, "n": 0}
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values), "n": len(values)}


def summarize(records: list[dict[str, Any]], repeats: int) -> dict[str, Any]:
    """`records`: one dict per trial with repeat, index, params, status,
    fresh_examples_to_target, best_accuracy, best_metric (train.metric's best, whichever its
    direction), mlflow_run_id (and error)."""
    per_repeat = []
    for r in range(repeats):
        trials = sorted((t for t in records if t["repeat"] == r), key=lambda t: t["index"])
        best = best_of(trials)
        per_repeat.append({
            "repeat": r,
            "best": None if best is None else {
                k: best.get(k) for k in ("trial_key", "index", "params", "seed", "fresh_examples_to_target",
                                         "steps_to_target", "best_accuracy", "best_metric", "mlflow_run_id")},
            "trials": len(trials),
            "reached": sum(t["status"] == REACHED for t in trials),
            "not_reached": sum(t["status"] == NOT_REACHED for t in trials),
            "errors": sum(t["status"] == ERROR for t in trials),
        })
    bests = [p["best"] for p in per_repeat if p["best"] is not None]
    return {
        "repeats": per_repeat,
        "fresh_examples_to_target": spread([b["fresh_examples_to_target"] for b in bests]),
        "best_accuracy": spread([b["best_accuracy"] for b in bests if b["best_accuracy"] is not None]),
        "best_metric": spread([b["best_metric"] for b in bests if b["best_metric"] is not None]),
        "repeats_without_a_best": [p["repeat"] for p in per_repeat if p["best"] is None],
    }
