"""`echoray report DIR`: from a study folder to the papers' plots and a report.json.

Figure 3 of the data-echoing paper: per variant, fresh examples to reach the target
relative to the baseline (mean over repeats of each repeat's best trial, error bars
at min and max), with a dotted line at 1/e. Batch augmentation: the best value of
train.metric against M (the highest accuracy, the lowest bits per byte). The PNGs are saved in DIR and logged to the study's MLflow run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from echoray.config_load import ConfigError
from echoray.messages import say
from echoray.metrics import metric_named
from echoray.summary import write_json_atomic
from echoray.tune.variants import parse_variants


def _rows(d: Path, state: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for v in parse_variants(state["variants"]):
        path = d / v.slug / "summary.json"
        if not path.exists():
            raise ConfigError(f"{path}: variant {v.name} has no finished search yet "
                              f"(finish it with: echoray study --resume {d})")
        s = json.loads(path.read_text())
        rows.append({"variant": v.name, "label": v.label, "stage": v.stage, "factor": v.factor, "copies": v.copies,
                     "fresh_examples_to_target": s["fresh_examples_to_target"], "best_accuracy": s["best_accuracy"],
                     "best_metric": s.get("best_metric", s["best_accuracy"]),
                     "repeats_without_a_best": s["repeats_without_a_best"],
                     "mlflow_parent_run_id": s["mlflow_parent_run_id"]})
    return rows


def relative_to(base_mean: float | None, spread: dict[str, Any]) -> dict[str, Any]:
    if not base_mean or not spread["n"]:
        return {"mean": None, "min": None, "max": None, "n": spread["n"]}
    return {k: spread[k] / base_mean for k in ("mean", "min", "max")} | {"n": spread["n"]}


def write_report(d: Path) -> dict[str, Any]:
    from echoray.tracking import RunLogger
    from echoray.tune.plots import plot_batch_augmentation, plot_figure3, reach_sign

    if not (d / "study.json").exists():
        raise ConfigError(f"{d}: no study.json there; `echoray report` reads a folder made by `echoray study`")
    state = json.loads((d / "study.json").read_text())
    rows = _rows(d, state)
    baseline = next((r for r in rows if r["stage"] == "none" and r["copies"] == 1), None)
    base_mean = baseline["fresh_examples_to_target"]["mean"] if baseline else None
    for r in rows:
        r["relative"] = relative_to(base_mean, r["fresh_examples_to_target"])
    name = state["config"]["name"]
    target = state["config"]["train"]["target"]
    metric = state["config"]["train"].get("metric", "accuracy")
    title = (f"{name}: {state['trials']} quasi-random trials x {state['repeats']} repeats, "
             f"target {metric.replace('_', ' ')} {reach_sign(metric)} {target}")
    plots = []
    echo_rows = [r for r in rows if r["copies"] == 1]
    if baseline and base_mean:
        plots.append(plot_figure3(echo_rows, d / "figure3_fresh_examples.png", title))
    else:
        say("report: no baseline variant reached the target, so there is no Figure 3 (fresh examples relative to it)")
    ba_rows = [r for r in rows if r["stage"] == "none" and r["best_metric"]["n"]]
    if any(r["copies"] > 1 for r in ba_rows):
        plots.append(plot_batch_augmentation(sorted(ba_rows, key=lambda r: r["copies"]),
                                             d / f"batch_augmentation_{metric}.png", title, metric))
    report = {"study_dir": str(d.resolve()), "title": title, "baseline_mean_fresh_examples": base_mean,
              "variants": rows, "plots": [str(p) for p in plots], "mlflow_study_run_id": state["study_run_id"]}
    write_json_atomic(d / "report.json", report)
    logger = RunLogger(state["tracking_uri"], state["config"]["tracking"]["experiment"])
    logger.run_id = state["study_run_id"]
    for p in [*plots, d / "report.json"]:
        logger.log_file(p)
    for line in format_table(rows, metric):
        say(line)
    return report


def format_table(rows: list[dict[str, Any]], metric: str = "accuracy") -> list[str]:
    def num(x: float | None, fmt: str) -> str:
        return format(x, fmt) if x is not None else "-"

    out = [f"{'variant':<24} {'fresh to target mean [min, max]':>34} {'relative':>9} {'1/e':>6} {'best ' + metric_named(metric).label:>9}"]
    for r in rows:
        f, rel = r["fresh_examples_to_target"], r["relative"]
        span = f"{num(f['mean'], ',.0f')} [{num(f['min'], ',.0f')}, {num(f['max'], ',.0f')}]"
        out.append(f"{r['label']:<24} {span:>34} {num(rel['mean'], '.3f'):>9} "
                   f"{(1 / r['factor']):>6.3f} {num(r['best_metric']['mean'], '.4f'):>9}")
    return out
