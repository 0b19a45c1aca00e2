"""What `echoray tune` prints at the end: each repeat's best trial and the spread."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from echoray.messages import say


def _params(p: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in p.items())


def print_search(s: dict[str, Any]) -> None:
    t = s["target"]
    sign = "<=" if t.get("direction") == "lower is better" else ">="  # echoray/metrics.py
    if t["value"] is None:
        say("objective: none (train.target is null): no trial can reach a target, none is best")
    else:
        say(f"objective: fewest fresh examples to reach {t['metric']} {sign} {t['value']}")
    for rep in s["repeats"]:
        b = rep["best"]
        counts = f"{rep['reached']}/{rep['trials']} reached, {rep['errors']} failed"
        if b is None:
            say(f"repeat {rep['repeat']}: no trial reached the target ({counts})")
        else:
            say(f"repeat {rep['repeat']}: best {b['trial_key']} with {b['fresh_examples_to_target']} fresh examples "
                f"({_params(b['params'])}; {counts})")
    fe = s["fresh_examples_to_target"]
    if fe["n"]:
        say(f"fresh examples to target over {fe['n']} repeat(s): mean {fe['mean']:.0f}, "
            f"min {fe['min']}, max {fe['max']}")
    say(f"summary: {Path(s['search_dir']) / 'summary.json'}  |  plot: {Path(s['search_dir']) / 'trials.png'}")
    say(f"MLflow parent run {s['mlflow_parent_run_id']} at {s['mlflow_tracking_uri']}")
