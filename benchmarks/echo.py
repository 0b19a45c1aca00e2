"""Data echoing on an input-bound pipeline: e = 1, 2, 4, 8 and auto, at R ~ 4, ~ 5 and ~ 8,
three seeds each, side by side in one run (issue 14).

The source is put behind the emulated slow store (slow_store.py, a reader by import path: a per-request latency; reads
wait, they do not compute), calibrated so that R = upstream time / downstream time per
sample is about 4 or 8 on this machine. `train.evals_per_epoch: 4` observes fresh
examples and time to target every quarter epoch. Per (R, e), over the seeds:

- step-rate speed-up over e = 1 of the same seed (steps/s between the first and the last
  evaluation), divided by the ideal min(e, R) (auto: min(R, echo.max_factor)), R the
  mean measured over the seed's five runs; also against the R the run itself measured
  ("of own": this shared machine's load moves R from run to run by tens of percent);
  goal: auto >= 0.9;
- time to target (benchmarks/ttt.py): wall clock from the run's command to the evaluation
  that crossed the target, and from its first step; a miss counts at its budget; per
  factor how many seeds reached it and the medians, e = 1's median over the factor's
  (x faster); the target is fixed before the runs by an e = 1 pilot of seed 100 (its
  accuracy at 70% of its budget: `--target pilot`, the default), at the level's store;
  goal: auto >= 3.5x e = 1 at R ~ 5 (the paper: 3.25x at e = 5, ResNet-50 on ImageNet);
- fresh examples to target, and the mean e trained (trained samples / fresh).

`--halving`: one auto run whose emulated latency halves mid-run; its factor trace
(summary.json echo.factor_history) must follow R down: echo_factor_trace.png.
Figures: benchmarks/results/echo.json, echo_time_vs_factor.png (the paper's Figure 4
style, bars min..max over seeds), echo_halving.json, echo_factor_trace.png.

    .venv/bin/python benchmarks/echo.py --r 4 --seeds 0,1,2       # one R level: echo_R4.json
    .venv/bin/python benchmarks/echo.py --r 5 --seeds 0,1,2       # echo_R5.json
    .venv/bin/python benchmarks/echo.py --r 8 --seeds 0,1,2
    .venv/bin/python benchmarks/echo.py --combine                 # echo.json + the figure
    .venv/bin/python benchmarks/echo.py --halving
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

import common
import ttt
from common import RESULTS, load_avg, save, settled_load, train_in_process
from echo_plots import factor_trace, time_vs_factor
from slow_store import overrides as slow_store

CHUNK = 16
FACTORS = ("1", "2", "4", "8", "auto")
MAX_FACTOR = 8.0
COMMON = [f"source.chunk_size={CHUNK}",
          "train.evals_per_epoch=4", f"echo.max_factor={MAX_FACTOR}",
          "scaling.cpus_per_worker=1", "echo.shuffle_buffer=256"]


def steady_step_rate(summary: dict) -> float:
    """Steps per second of training between the first and the last evaluation."""
    h = summary["history"]
    if len(h) < 3:
        return summary["steps"] / max(summary["train_loop_s"] - summary["eval_s"], 1e-9)
    a, b = h[0], h[-1]
    return (b["step"] - a["step"]) / (b["train_s"] - a["train_s"])


def pipeline_kind() -> str:
    """The source kind of the pipeline trained (common.PIPELINE), which the slow store wraps."""
    from echoray.config_load import load_config

    return load_config(common.PIPELINE).source.kind


def run(factor: str, latency_ms: float, target, epochs: int, seed: int, change: dict | None = None) -> dict:
    """`change`: the store's {change_after_s, latency_ms_after}, a latency that changes mid-run."""
    store = slow_store(pipeline_kind(), latency_ms=latency_ms, read_concurrency=1, **(change or {}))  # a read = one latency
    overrides = [*COMMON, f"seed={seed}", f"echo.stage={'none' if factor == '1' else 'after_augment'}",
                 f"echo.factor={factor}", *store,
                 f"train.max_epochs={epochs}", f"train.target={target}"]
    summary, peak = train_in_process(overrides, f"e{factor}-s{seed}")
    return {
        "factor": factor, "seed": seed, "steps": summary["steps"], "step_rate": steady_step_rate(summary),
        "measured_R": summary["measured_R"], "upstream_examples_per_s": summary["upstream_examples_per_s"],
        "downstream_examples_per_s": summary["downstream_examples_per_s"],
        "mean_e_trained": summary["echo"]["measured_factor"], "final_factor": summary["echo"]["final_factor"],
        "duplicate_batch_fraction": summary["echo"]["duplicate_batch_fraction"],
        "fresh_examples_to_target": summary["fresh_examples_to_target"],
        "time_to_target_s": summary["time_to_target_s"], "train_time_to_target_s": summary["train_time_to_target_s"],
        **ttt.times(summary), "time_to_first_read_s": summary["time_to_first_read_s"],
        "accuracy": summary["metric"]["value"], "evaluations": ttt.curve(summary, "accuracy"),
        "peak_pss_gib": peak / 2**30, "factor_history": summary["echo"]["factor_history"],
    }


def calibrate(target_r: float) -> tuple[float, dict]:
    """Latency per CHUNK read for R = target_r: a read costs compute c plus the latency L,
    upstream = CHUNK / (c + L); pick L so that downstream / upstream = R."""
    probe_ms = 10.0
    probe = run("1", probe_ms, "null", 2, 0)
    compute_s = max(0.0, CHUNK / probe["upstream_examples_per_s"] - probe_ms / 1000)
    wanted_up = probe["downstream_examples_per_s"] / target_r
    latency = round(max(0.0, CHUNK / wanted_up - compute_s) * 1000, 1)
    print(f"calibration: latency {probe_ms} ms -> R {probe['measured_R']:.2f}; R {target_r} needs {latency} ms",
          flush=True)
    return latency, {"probe_latency_ms": probe_ms, "probe_R": probe["measured_R"],
                     "downstream_examples_per_s": probe["downstream_examples_per_s"], "compute_s_per_read": compute_s}


def spread(values: list[float]) -> dict:
    v = [x for x in values if x is not None]
    return {"n": len(v), "mean": statistics.fmean(v) if v else None, "min": min(v, default=None),
            "max": max(v, default=None), "values": v}


def summarise(runs: list[dict]) -> list[dict]:
    """Per factor, over seeds: ratios against the e = 1 run of the same seed."""
    base = {r["seed"]: r for r in runs if r["factor"] == "1"}
    # R of a seed: the mean over its runs (one run's R moves with this shared machine's load)
    r_of = {s: statistics.fmean(r["measured_R"] for r in runs if r["seed"] == s and r["measured_R"]) for s in base}
    rows = []
    for f in FACTORS:
        mine = [r for r in runs if r["factor"] == f and r["seed"] in base]
        if not mine:
            continue
        speed, ideal, of_ideal, of_own, fresh_ratio = [], [], [], [], []
        for r in mine:
            b = base[r["seed"]]
            r_seed = r_of[r["seed"]]
            e = MAX_FACTOR if f == "auto" else float(f)
            speed.append(r["step_rate"] / b["step_rate"])
            ideal.append(min(e, r_seed))
            of_ideal.append(speed[-1] / ideal[-1])
            if r["measured_R"]:  # against the R this run itself measured (the load moves R run to run)
                of_own.append(speed[-1] / min(e, r["measured_R"]))
            if r["fresh_examples_to_target"] and b["fresh_examples_to_target"]:
                fresh_ratio.append(r["fresh_examples_to_target"] / b["fresh_examples_to_target"])
        rows.append({
            "factor": f, "step_rate_speedup": spread(speed), "ideal_speedup": spread(ideal),
            "fraction_of_ideal": spread(of_ideal), "fraction_of_own_ideal": spread(of_own),
            "time_to_target": ttt.row(mine, list(base.values())),
            # per seed, against e = 1 of the seed, from the command's start, misses at the budget
            "relative_time_to_target": spread([r["time_to_target_or_budget_s"] / base[r["seed"]]["time_to_target_or_budget_s"]
                                               for r in mine]),
            "time_to_target_or_budget_s": spread([r["time_to_target_or_budget_s"] for r in mine]),
            "fresh_examples_to_target": spread([r["fresh_examples_to_target"] for r in mine]),
            "fresh_vs_e1": spread(fresh_ratio), "mean_e_trained": spread([r["mean_e_trained"] for r in mine]),
            "measured_R": spread([r["measured_R"] for r in mine]), "reached": sum(r["target_reached"] for r in mine),
        })
    return rows


def print_table(level: dict) -> None:
    print(f"\nR ~ {level['R']:.1f} (latency {level['latency_ms']} ms per {CHUNK}-sample read), "
          f"target {level['target']}, seeds {level['seeds']}")
    print(f"{'e':>5} {'speedup':>8} {'ideal':>6} {'of ideal':>9} {'of own':>7} {'reached':>8} "
          f"{'x faster from start / first step':>33} {'fresh->target':>13} {'mean e':>7}")
    for row in level["rows"]:
        t = row["time_to_target"]
        fmt = f"{t['speedup_from_start'] or 0:.2f} / {t['speedup_from_first_step'] or 0:.2f}"
        f = row["fresh_examples_to_target"]
        print(f"{row['factor']:>5} {row['step_rate_speedup']['mean']:>8.2f} {row['ideal_speedup']['mean']:>6.2f} "
              f"{row['fraction_of_ideal']['mean']:>9.2f} {row['fraction_of_own_ideal']['mean'] or 0:>7.2f} "
              f"{t['reached']:>4}/{t['runs']:<3} {fmt:>33} {f['mean'] or 0:>13,.0f} "
              f"{row['mean_e_trained']['mean']:>7.2f}")


def level_run(target_r: float, seeds: list[int], target: str, epochs: int, factors=FACTORS, args=None,
              name: str = "echo") -> None:
    """One R level: calibrate the store, fix the target (a number, or `pilot`), run every
    (seed, factor), save NAME_R<r>.json."""
    load0 = settled_load()  # the previous level's Ray shut down: its load is not other work
    t0, uptime0 = time.time(), uptime()
    latency, cal = calibrate(target_r)
    pilot = None
    if target == "pilot":  # e = 1 of a seed not measured, the whole budget, at this level's store
        probe = run("1", latency, "null", epochs, ttt.PILOT_SEED)
        pilot = {**ttt.pilot_value(probe["evaluations"], "accuracy"), "evaluations": probe["evaluations"],
                 "wall_s": probe["wall_s"]}
        target = pilot["target"]
        print(f"pilot: e = 1 seed {ttt.PILOT_SEED} at evaluation {pilot['at_evaluation']} of {pilot['of']}: "
              f"target {target}", flush=True)
    runs = []
    for seed in seeds:
        for f in factors:
            res = run(f, latency, target, epochs, seed)
            runs.append(res)
            print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in res.items() if k != "factor_history"},
                  flush=True)
    level = {"R_target": target_r, "R": statistics.fmean(r["measured_R"] for r in runs if r["measured_R"]),
             "latency_ms": latency, "target": target, "pilot": pilot, "epochs": epochs, "seeds": len(seeds), "calibration": cal,
             "factors": list(factors), "seed_list": seeds, "pipeline": common.PIPELINE or "embedded:digits",
             "uptime_before": uptime0, "uptime_after": uptime(),
             "rows": summarise(runs), "runs": runs, "wall_s": time.time() - t0}
    print_table(level)
    print(f"saved {save(f'{name}_R{target_r:g}', level, args, start_load=load0, end_load=settled_load())}")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def combine(name: str = "echo") -> None:
    levels = [json.loads(p.read_text()) for p in sorted(RESULTS.glob(f"{name}_R*.json"))]
    levels.sort(key=lambda x: x["R"])
    for level in levels:  # the summary from the saved runs, so a change to it reaches every level
        level["rows"] = summarise(level["runs"])
    for level in levels:
        print_table(level)
    png = RESULTS / f"{name}_time_vs_factor.png"
    time_vs_factor(levels, png)
    old = json.loads((RESULTS / f"{name}.json").read_text()) if (RESULTS / f"{name}.json").exists() else {}
    # each level keeps its own recorded load (load_avg, or the older loadavg_before/after)
    save(name, {"levels": [{k: v for k, v in lv.items() if k != "runs"} for lv in levels],
                "pipeline_overhead": old.get("pipeline_overhead"), "plot": png.name,
                "runs_in": [f"{name}_R{lv['R_target']:g}.json" for lv in levels]})
    print(f"saved {RESULTS / (name + '.json')} and {png}")


def halving(target_r: float, change_after_s: float, epochs: int, args=None) -> None:
    """An auto run at R ~ target_r whose latency halves change_after_s after the first read."""
    load0 = os.getloadavg()
    latency, cal = calibrate(target_r)
    res = run("auto", latency, "null", epochs, 0, {"change_after_s": change_after_s, "latency_ms_after": latency / 2})
    print({k: v for k, v in res.items() if k != "factor_history"})
    first = res["time_to_first_step_s"]
    trace = [{**p, "t": round(p["t"] - first, 2)} for p in res["factor_history"]]
    change = None
    if res.get("time_to_first_read_s") is not None:
        change = res["time_to_first_read_s"] + change_after_s - first
    before = [p["factor"] for p in trace if change is not None and change - 4 <= p["t"] < change]
    after = [p["factor"] for p in trace if change is not None and p["t"] >= change + 3]
    out = {"latency_ms": latency, "latency_ms_after": latency / 2, "change_after_first_read_s": change_after_s,
           "change_since_first_step_s": change, "calibration": cal, "factor_history": trace,
           "mean_factor_4s_before": statistics.fmean(before) if before else None,
           "mean_factor_from_3s_after": statistics.fmean(after) if after else None,
           "max_factor_seen": max((p["factor"] for p in trace), default=None), "max_factor": MAX_FACTOR,
           "run": {k: v for k, v in res.items() if k != "factor_history"}}
    print({k: out[k] for k in ("change_since_first_step_s", "mean_factor_4s_before", "mean_factor_from_3s_after",
                                "max_factor_seen")})
    factor_trace(trace, change, MAX_FACTOR, RESULTS / "echo_factor_trace.png")
    print(f"saved {save('echo_halving', out, args, start_load=load0)} and {RESULTS / 'echo_factor_trace.png'}")


def pipeline_overhead(repeats: int = 3) -> dict:
    """Rows/s of the Ray Data pipeline alone, echo op at e = 1 versus no echo op."""
    load0 = os.getloadavg()
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
            "overhead_fraction": (a - p) / a, "load_avg": load_avg(load0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--r", type=float, default=4.0, help="the R level to calibrate for")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--factors", default=",".join(FACTORS), help="the factors to run (e = 1 is the reference)")
    ap.add_argument("--target", default="pilot",
                    help="held-out accuracy to reach, or `pilot` (e = 1 of seed 100 at 70%% of its budget)")
    ap.add_argument("--epochs", type=int, default=8, help="the read budget (runs stop at the target)")
    ap.add_argument("--combine", action="store_true", help="echo.json and the figure from the echo_R*.json")
    ap.add_argument("--halving", action="store_true", help="one auto run whose emulated latency halves mid-run")
    ap.add_argument("--change-after", type=float, default=20.0, help="--halving: seconds after the first read")
    ap.add_argument("--overhead-only", action="store_true", help="only the echo-op overhead; updates echo.json")
    ap.add_argument("--pipeline", default=None, help="the pipeline YAML to train (default: the embedded digits)")
    ap.add_argument("--name", default="echo", help="results file stem: NAME_R<r>.json, NAME.json")
    args = ap.parse_args()
    common.PIPELINE = args.pipeline
    if args.combine:
        return combine(args.name)
    from echoray.runtime.session import start_ray

    start_ray()
    if args.overhead_only:
        overhead = pipeline_overhead(repeats=5)
        print(f"echo op at e=1 vs absent: overhead {overhead['overhead_fraction'] * 100:.1f}% (goal < 3%)")
        data = json.loads((RESULTS / "echo.json").read_text())
        data["pipeline_overhead"] = overhead  # with its own load_avg
        save("echo", data, args)
        return None
    if args.halving:
        return halving(args.r, args.change_after, args.epochs, args)
    factors = tuple(args.factors.split(","))
    if "1" not in factors or not set(factors) <= set(FACTORS):
        ap.error(f"--factors: a subset of {','.join(FACTORS)} that includes 1, got {args.factors}")
    if args.target != "pilot":
        try:
            float(args.target)
        except ValueError:
            ap.error(f"--target: a held-out accuracy or `pilot`, got {args.target!r}")
    return level_run(args.r, [int(s) for s in args.seeds.split(",")], args.target, args.epochs, factors, args,
                     args.name)


if __name__ == "__main__":
    main()
