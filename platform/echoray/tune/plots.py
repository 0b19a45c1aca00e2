"""Plots a person can read: the search's trials, the data-echoing paper's Figure 3,
and the batch-augmentation comparison. matplotlib, headless (Agg)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402


def plot_trials(summary: dict[str, Any], path: Path) -> Path:
    """Fresh examples to target against each searched value; x marks trials that failed."""
    space, trials = summary["space"], summary["trials"]
    fig, axes = plt.subplots(1, len(space), figsize=(4.5 * len(space), 3.6), squeeze=False)
    reached = [t["fresh_examples_to_target"] for t in trials if t["status"] == "reached"]
    ceiling = max(reached) * 1.15 if reached else 1.0
    for ax, (key, spec) in zip(axes[0], space.items(), strict=True):
        flip = spec.get("one_minus")  # plot 1 - value, the searched quantity

        def x(t, key=key, flip=flip):
            return 1.0 - t["params"][key] if flip else t["params"][key]

        for r in range(len(summary["repeats"])):
            mine = [t for t in trials if t["repeat"] == r]
            ok = [t for t in mine if t["status"] == "reached"]
            bad = [t for t in mine if t["status"] != "reached"]
            dots = ax.scatter([x(t) for t in ok], [t["fresh_examples_to_target"] for t in ok],
                              s=28, label=f"repeat {r}")
            ax.scatter([x(t) for t in bad], [ceiling] * len(bad), marker="x",
                       color=dots.get_facecolor()[0] if len(ok) else None, s=36)
        if spec.get("scale") == "log" and spec.get("choices") is None:
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"1 - {key}" if flip else key)
        ax.set_ylabel("fresh examples to target")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, title="x: target not reached", title_fontsize=7)
    fig.suptitle(f"{len(trials)} trials, target {summary['target']['metric']} "
                 f"{reach_sign(summary['target']['metric'])} {summary['target']['value']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_figure3(rows: list[dict[str, Any]], path: Path, title: str) -> Path:
    """Fresh examples to target relative to the baseline: bars at the mean, error bars
    at min and max over repeats, a dotted line at 1/e per echoing variant."""
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(rows), 4.0))
    xs = range(len(rows))
    means = [r["relative"]["mean"] or 0.0 for r in rows]
    lo = [(r["relative"]["mean"] - r["relative"]["min"]) if r["relative"]["n"] else 0.0 for r in rows]
    hi = [(r["relative"]["max"] - r["relative"]["mean"]) if r["relative"]["n"] else 0.0 for r in rows]
    ax.bar(xs, means, yerr=[lo, hi], capsize=5, color=["#888888" if r["factor"] == 1 else "#3a7dc9" for r in rows])
    for x, r in zip(xs, rows, strict=True):
        if r["factor"] > 1:
            ax.hlines(1.0 / r["factor"], x - 0.4, x + 0.4, colors="k", linestyles="dotted")
        if not r["relative"]["n"]:
            ax.text(x, 0.05, "no repeat\nreached\nthe target", ha="center", fontsize=7)
    ax.axhline(1.0, color="#888888", lw=0.8)
    ax.set_xticks(list(xs), [r["label"] for r in rows], rotation=20, ha="right")
    ax.set_ylabel("fresh examples to target / baseline")
    ax.set_title(title + "\n(dotted: 1/e, repeated examples worth as much as fresh ones)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def reach_sign(metric: str) -> str:
    """How a value reaches the target of `metric`: >= (accuracy) or <= (bits per byte)."""
    from echoray.metrics import metric_named

    return ">=" if metric_named(metric).higher_is_better else "<="


def plot_batch_augmentation(rows: list[dict[str, Any]], path: Path, title: str,
                            metric: str = "accuracy") -> Path:
    """Best held-out `metric` (rows' best_metric) against M (copies per sample): mean with
    min/max bars; for a lower-is-better metric (bits per byte) the best is the lowest."""
    fig, ax = plt.subplots(figsize=(5.0, 3.8))
    ms = [r["copies"] for r in rows]
    key = "best_metric" if all("best_metric" in r for r in rows) else "best_accuracy"
    mean = [r[key]["mean"] for r in rows]
    err = [[m - r[key]["min"] for m, r in zip(mean, rows, strict=True)],
           [r[key]["max"] - m for m, r in zip(mean, rows, strict=True)]]
    ax.errorbar(ms, mean, yerr=err, marker="o", capsize=5)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ms, [str(m) for m in ms])
    ax.set_xlabel("batch augmentation copies M")
    ax.set_ylabel(f"best held-out {metric.replace('_', ' ')} (best trial per repeat)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
