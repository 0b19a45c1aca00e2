"""Data echoing on an input-bound pipeline: e = 1, 2, 4 and auto, side by side, one run.

The digits source is put behind the emulated remote store (per-request latency;
reads wait, they do not compute) and the latency is calibrated so that the measured
R = upstream time / downstream time per example is about 4 on this machine. Then,
same seed for every run:

- step-rate speedup over e = 1 after the first epoch (prefetched start-up data
  excluded), next to the ideal min(e, R); goal >= 0.9 of ideal for e = 2 and 4;
- training time and fresh examples to the digits target (0.97) versus e = 1, with the
  paper's anchor: 3.25x less wall-clock for ResNet-50 at e = 5 (Choi et al. 2019);
- Ray Data throughput with the echo operator present at e = 1 versus absent (goal:
  under 3% overhead);
- peak memory of the process tree at e = 1 and e = 4;
- a plot in the style of the paper's Figure 4 (training time vs e) and the JSON.

    .venv/bin/python benchmarks/echo.py [--stage after_augment] [--target-r 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from common import RESULTS, save, train_in_process

CHUNK = 16


def steady_step_rate(summary: dict) -> float:
    """Steps per second of training after the first epoch (start-up prefetch excluded)."""
    h = summary["history"]
    if len(h) < 3:
        return summary["steps"] / max(summary["train_loop_s"] - summary["eval_s"], 1e-9)
    a, b = h[0], h[-1]
    return (b["step"] - a["step"]) / (b["train_s"] - a["train_s"])


def run(stage: str, factor, latency_ms: float, target, epochs: int) -> dict:
    overrides = [f"echo.stage={'none' if factor == 1 else stage}", f"echo.factor={factor}",
                 f"source.chunk_size={CHUNK}", f"source.remote={{latency_ms: {latency_ms}}}",
                 # One request in flight: the calibration below prices a CHUNK read at one latency.
                 "source.read_concurrency=1",
                 f"train.max_epochs={epochs}", f"train.target={target}", "echo.max_factor=8",
                 "scaling.cpus_per_worker=1"]
    summary, peak = train_in_process(overrides, f"e{factor}")
    return {
        "factor": factor, "stage": summary["echo"]["stage"],
        "steps": summary["steps"], "step_rate": steady_step_rate(summary),
        "measured_R": summary["measured_R"],
        "upstream_examples_per_s": summary["upstream_examples_per_s"],
        "downstream_examples_per_s": summary["downstream_examples_per_s"],
        "measured_factor": summary["echo"]["measured_factor"], "final_factor": summary["echo"]["final_factor"],
        "duplicate_batch_fraction": summary["echo"]["duplicate_batch_fraction"],
        "target_reached": summary["target_reached"],
        "fresh_examples_to_target": summary["fresh_examples_to_target"],
        "train_time_to_target_s": summary["train_time_to_target_s"],
        "accuracy": summary["metric"]["value"], "peak_pss_gib": peak / 2**30,
    }


def pipeline_overhead(repeats: int = 3) -> dict:
    """Rows/s of the Ray Data pipeline alone, echo op at e = 1 versus no echo op."""
    from echoray.config_load import load_config
    from echoray.data.pipeline import build_train_dataset
    from echoray.data.sources import index_source

    def rate(stage: str) -> float:
        cfg = load_config(None, [f"echo.stage={stage}", "echo.factor=1", "train.max_epochs=20"])
        ds = build_train_dataset(cfg, index_source(cfg.source))
        n, t_first = 0, None
        for batch in ds.iter_batches(batch_size=256, batch_format="numpy"):
            if t_first is None:
                t_first = time.perf_counter()  # actor start-up excluded
            else:
                n += len(batch["sample_id"])
        return n / (time.perf_counter() - t_first)

    absent, present = [], []
    for _ in range(repeats):  # alternate, so drift hits both alike
        absent.append(rate("none"))
        present.append(rate("after_augment"))
    a, p = statistics.median(absent), statistics.median(present)
    return {"rows_per_s_without_echo": absent, "rows_per_s_with_echo_e1": present,
            "overhead_fraction": (a - p) / a}


def plot(results: list[dict], r: float, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = results[0]["train_time_to_target_s"]
    # auto at its run-average factor (trained / fresh): what the examples actually saw
    xs = [x["measured_factor"] if x["factor"] == "auto" else x["factor"] for x in results]
    ys = [x["train_time_to_target_s"] / base if x["train_time_to_target_s"] else float("nan") for x in results]
    grid = [1 + i * 0.05 for i in range(int((max(xs + [r]) + 1 - 1) / 0.05) + 1)]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(grid, [max(1 / e, 1 / r) for e in grid], ":", color="gray",
            label=f"ideal if repeats were as good as fresh (R = {r:.1f})")
    for x, y, res in zip(xs, ys, results, strict=True):
        ax.plot([x], [y], "o", color="C1" if res["factor"] == "auto" else "C0")
        label = f"auto (mean e {x:.1f})" if res["factor"] == "auto" else f"e={res['factor']}"
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(6, -14) if res["factor"] == "auto" else (5, 5))
    ax.axvline(r, color="C2", alpha=0.4, label="measured R")
    ax.set_xlabel("echo factor e")
    ax.set_ylabel("training time to 97% (relative to e = 1)")
    ax.set_title(f"Data echoing on digits, emulated remote store ({results[1]['stage']})")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def replot() -> None:
    """Redraw the figure from the saved JSON (no runs)."""
    data = json.loads((RESULTS / "echo.json").read_text())
    plot(data["runs"], data["measured_R"], RESULTS / "echo_time_vs_factor.png")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage", default="after_augment", choices=["before_augment", "after_augment", "batch"])
    ap.add_argument("--target-r", type=float, default=4.0)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--replot", action="store_true", help="redraw the plot from results/echo.json")
    ap.add_argument("--overhead-only", action="store_true", help="only the echo-op overhead; updates echo.json")
    args = ap.parse_args()
    if args.replot:
        return replot()
    if args.overhead_only:
        from echoray.runtime.session import start_ray

        start_ray()
        overhead = pipeline_overhead(repeats=5)
        print(f"echo op at e=1 vs absent: overhead {overhead['overhead_fraction'] * 100:.1f}% (goal < 3%)")
        data = json.loads((RESULTS / "echo.json").read_text())
        data["pipeline_overhead"] = overhead
        save("echo", data)
        return None

    from echoray.runtime.session import start_ray

    start_ray()
    # Calibrate: a read of CHUNK samples costs compute c plus the emulated latency L, so
    # upstream = CHUNK / (c + L); pick L so that downstream / upstream = target R.
    probe_latency = 10.0
    probe = run(args.stage, 1, probe_latency, "null", 4)
    compute_s = CHUNK / probe["upstream_examples_per_s"] - probe_latency / 1000
    wanted_up = probe["downstream_examples_per_s"] / args.target_r
    latency = round(max(0.0, CHUNK / wanted_up - compute_s) * 1000, 1)
    print(f"calibration: latency {probe_latency} ms -> R {probe['measured_R']:.2f}; using {latency} ms", flush=True)

    results = []
    for factor in (1, 2, 4, "auto"):
        res = run(args.stage, factor, latency, 0.97, args.epochs)
        results.append(res)
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in res.items()}, flush=True)
    r = results[0]["measured_R"]
    base = results[0]
    for res in results:
        e = res["final_factor"] if res["factor"] == "auto" else res["factor"]
        res["step_rate_speedup"] = res["step_rate"] / base["step_rate"]
        res["ideal_speedup"] = min(e, r)
        res["fraction_of_ideal"] = res["step_rate_speedup"] / res["ideal_speedup"]
        if res["train_time_to_target_s"] and base["train_time_to_target_s"]:
            res["time_to_target_ratio"] = base["train_time_to_target_s"] / res["train_time_to_target_s"]
        if res["fresh_examples_to_target"] and base["fresh_examples_to_target"]:
            res["fresh_ratio"] = res["fresh_examples_to_target"] / base["fresh_examples_to_target"]
    overhead = pipeline_overhead()

    print(f"\nmeasured R at e=1: {r:.2f} (latency {latency} ms per {CHUNK}-sample read)")
    print(f"{'e':>5} {'speedup':>8} {'ideal':>6} {'frac':>5} {'t->97% s':>9} {'x faster':>8} "
          f"{'fresh->97%':>10} {'fresh ratio':>11} {'peak GiB':>8}")
    for res in results:
        print(f"{str(res['factor']):>5} {res['step_rate_speedup']:>8.2f} {res['ideal_speedup']:>6.2f} "
              f"{res['fraction_of_ideal']:>5.2f} {res['train_time_to_target_s'] or float('nan'):>9.1f} "
              f"{res.get('time_to_target_ratio', float('nan')):>8.2f} {res['fresh_examples_to_target'] or 0:>10} "
              f"{res.get('fresh_ratio', float('nan')):>11.2f} {res['peak_pss_gib']:>8.2f}")
    print("paper anchor: 3.25x less wall-clock at e=5 (ResNet-50 ImageNet, network reads)")
    print(f"echo op at e=1 vs absent: overhead {overhead['overhead_fraction'] * 100:.1f}% (goal < 3%)")
    RESULTS.mkdir(exist_ok=True)
    png = RESULTS / "echo_time_vs_factor.png"
    plot(results, r, png)
    path = save("echo", {"stage": args.stage, "latency_ms": latency, "chunk_size": CHUNK, "measured_R": r,
                         "runs": results, "pipeline_overhead": overhead, "plot": str(png.name)})
    print(f"saved {path} and {png}")


if __name__ == "__main__":
    main()
