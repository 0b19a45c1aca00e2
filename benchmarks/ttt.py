"""Time to target as issue 64 reads it, shared by the benchmarks that measure one
(echo.py on images, lm_auto_echo.py on text, accelerator.py).

- The target is fixed before the measured runs by a pilot: an e = 1 run of PILOT_SEED (no
  measured seed) without a target, its held-out metric at the evaluation nearest PILOT_AT
  of its budget (`pilot_value`), so it is a value e = 1 is still improving towards, not a
  plateau.
- A run's time to target is wall clock from the command's start to the evaluation that
  crossed the target (summary.json `time_to_target_s`: nothing interpolated or modelled),
  and from its first step (minus `time_to_first_step_s`).
- A run that missed counts at its budget (its whole wall time): `reached` says how many
  did; `row` gives medians over seeds with the misses in.
"""

from __future__ import annotations

import statistics

PILOT_SEED, PILOT_AT = 100, 0.7


def pilot_value(evaluations: list[dict], key: str) -> dict:
    """The pilot's `key` at the evaluation nearest PILOT_AT of its evaluations (1-based)."""
    if not evaluations:
        raise ValueError("the pilot run made no evaluation: no target can be read from it")
    at = max(1, round(PILOT_AT * len(evaluations)))
    return {"seed": PILOT_SEED, "at_evaluation": at, "of": len(evaluations), "target": evaluations[at - 1][key]}


def curve(summary: dict, key: str) -> list[dict]:
    """A run's evaluations, as a benchmark keeps them: index, epoch, `key`, train_s, elapsed_s."""
    return [{"evaluation": h.get("evaluation"), "epoch": h.get("epoch"), key: h.get(key),
             "train_s": h.get("train_s"), "elapsed_s": h.get("elapsed_s")} for h in summary.get("history", [])]


def times(summary: dict) -> dict:
    """A run's time to target from the command's start and from its first step; a miss at
    its budget (the run's wall time)."""
    reached = bool(summary["target_reached"])
    total = summary["time_to_target_s"] if reached else summary["wall_s"]
    first = summary.get("time_to_first_step_s") or 0.0
    return {"target_reached": reached, "time_to_target_or_budget_s": total,
            "from_first_step_or_budget_s": total - first, "wall_s": summary["wall_s"],
            "time_to_first_step_s": first, "evaluations_made": len(summary.get("history", []))}


def row(runs: list[dict], base: list[dict]) -> dict:
    """One arm over its seeds against e = 1's (`base`): how many reached, the medians with
    misses at the budget, and e = 1's median over this arm's (x faster; > 1 is faster)."""
    def med(rs, key):
        return statistics.median(r[key] for r in rs) if rs else None

    out = {"runs": len(runs), "reached": sum(r["target_reached"] for r in runs)}
    for key, name in (("time_to_target_or_budget_s", "from_start"), ("from_first_step_or_budget_s", "from_first_step")):
        mine, ref = med(runs, key), med(base, key)
        out[f"median_{name}_s"] = mine
        out[f"speedup_{name}"] = ref / mine if mine and ref else None
    return out
