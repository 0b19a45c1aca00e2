"""The echo benchmark's figures (benchmarks/echo.py): time to target versus e in the
style of the data-echoing paper's Figure 4, with error bars over seeds, and the factor
trace of `echo.factor: auto` while the emulated latency halves."""

from __future__ import annotations

from pathlib import Path


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def time_vs_factor(levels: list[dict], path: Path) -> None:
    """One panel per R level: time to target from the command's start relative to e = 1 of
    the same seed (a miss at its budget; mean over seeds, bars min..max) at each fixed e and
    at auto's mean trained e, next to the ideal max(1/e, 1/R)."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(levels), figsize=(5.5 * len(levels), 4), squeeze=False)
    for ax, level in zip(axes[0], levels, strict=True):
        r = level["R"]
        grid = [1 + i * 0.05 for i in range(int((max(8.0, r) - 1) / 0.05) + 2)]
        ax.plot(grid, [max(1 / e, 1 / r) for e in grid], ":", color="gray",
                label=f"ideal: repeats as good as fresh data (R = {r:.1f})")
        for row in level["rows"]:
            rel = row["relative_time_to_target"]
            if rel["n"] == 0:
                continue
            auto = row["factor"] == "auto"
            x = row["mean_e_trained"]["mean"] if auto else float(row["factor"])
            ax.errorbar([x], [rel["mean"]], yerr=[[rel["mean"] - rel["min"]], [rel["max"] - rel["mean"]]],
                        fmt="s" if auto else "o", color="C1" if auto else "C0", capsize=4)
            label = f"auto (mean e {x:.1f})" if auto else f"e={row['factor']}"
            ax.annotate(label, (x, rel["mean"]), textcoords="offset points", xytext=(6, -12 if auto else 4),
                        fontsize=8)
        ax.axvline(r, color="C2", alpha=0.4, label="measured R")
        ax.set_xlabel("echo factor e")
        ax.set_ylabel(f"time to {level['target']:.0%} relative to e = 1")
        data = Path(level.get("pipeline") or "digits").stem.removeprefix("embedded:")  # older files: digits
        ax.set_title(f"{data}, emulated remote store, R = {r:.1f} ({level['seeds']} seeds, min..max)", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def factor_trace(trace: list[dict], change_s: float | None, max_factor: float, path: Path) -> None:
    """e and the measured R over the run's time (since its first step)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    t = [p["t"] for p in trace]
    ax.plot(t, [p["measured_R"] for p in trace], ".", color="gray", alpha=0.6, label="measured R (0.5 s window)")
    ax.step(t, [p["factor"] for p in trace], where="post", color="C1", label="echo factor e (auto)")
    ax.axhline(max_factor, color="C3", ls="--", alpha=0.4, label="echo.max_factor")
    if change_s is not None:
        ax.axvline(change_s, color="C2", alpha=0.5, label="emulated latency halves")
    ax.set_xlabel("seconds since the first train step")
    ax.set_ylabel("factor")
    ax.set_title("echo.factor: auto while the source gets twice as fast", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
