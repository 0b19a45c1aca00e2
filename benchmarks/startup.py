"""Measure the default run as a newcomer sees it: `echoray train` from the shell.

Prints and saves (benchmarks/results/startup.json): wall time from command start to
summary, time to first training step, time to the digits target, and the peak
memory of the whole process tree (the CLI driver, Ray's GCS/raylet/dashboard, train
workers, Ray Data actors), summed as PSS so shared pages count once.

    .venv/bin/python benchmarks/startup.py [--repeats 3] [--code A/platform B/platform]
        [--trainers auto false] [-- extra echoray args]

`--trainers`: values of scaling.local_mode to run side by side (auto: the default, a
one-worker run trains in the CLI's process; false: a Ray Train worker group).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from common import REPO, save, tree_pss


def one_run(extra: list[str], code: str) -> dict:
    exe = Path(sys.executable).parent / "echoray"
    with tempfile.TemporaryDirectory() as d:
        t0 = time.time()
        proc = subprocess.Popen([str(exe), "train", "--out", "run", *extra], cwd=d,
                                env={**os.environ, "PYTHONPATH": code},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        root = psutil.Process(proc.pid)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, tree_pss(root))
            time.sleep(0.25)
        out = proc.stdout.read()
        wall = time.time() - t0
        if proc.returncode != 0:
            raise SystemExit(f"echoray train failed ({proc.returncode}):\n{out[-3000:]}")
        s = json.loads((Path(d) / "run" / "summary.json").read_text())
    return {
        "wall_s": round(wall, 1),
        "time_to_first_step_s": round(s["time_to_first_step_s"], 1),
        "time_to_target_s": round(s["time_to_target_s"], 1) if s["time_to_target_s"] else None,
        "target_reached": s["target_reached"],
        "accuracy": round(s["metric"]["value"], 4),
        "epochs": s["epochs"],
        "fresh_examples_to_target": s["fresh_examples_to_target"],
        "peak_pss_gib": round(peak / 2**30, 2),
    }


def summarize(runs: list[dict]) -> dict:
    keys = ["wall_s", "time_to_first_step_s", "time_to_target_s", "peak_pss_gib"]
    summary = {k: {"median": statistics.median(r[k] for r in runs if r[k] is not None),
                   "min": min(r[k] for r in runs if r[k] is not None),
                   "max": max(r[k] for r in runs if r[k] is not None)} for k in keys}
    summary["targets_reached"] = sum(r["target_reached"] for r in runs)
    return summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--code", nargs="+", default=[str(REPO / "platform")],
                    help="platform/ folders to compare, run in turn each repeat (e.g. main's, then this one's)")
    ap.add_argument("--trainers", nargs="+", default=[None],
                    help="scaling.local_mode values to compare (e.g. auto false); default: the config's")
    ap.add_argument("extra", nargs="*")
    args = ap.parse_args()
    load_before = os.getloadavg()
    variants = [(code, t) for code in args.code for t in args.trainers]
    label = {v: v[0] + (f" in_process={v[1]}" if v[1] else "") for v in variants}
    runs: dict[str, list[dict]] = {label[v]: [] for v in variants}
    for i in range(args.repeats):
        for code, trainer in variants:  # interleaved: a load change hits all alike
            extra = [*args.extra, *(["--set", f"scaling.local_mode={trainer}"] if trainer else [])]
            r = one_run(extra, code)
            runs[label[code, trainer]].append(r)
            print(f"{label[code, trainer]} run {i + 1}: " + ", ".join(f"{k}={v}" for k, v in r.items()), flush=True)
    goal = {"wall_s": 20, "time_to_first_step_s": 10}  # issue 59: `make run` <= 20 s, first step <= 10 s
    summaries = {c: summarize(rs) for c, rs in runs.items()}
    print(f"{'code':<44}{'figure':<24}{'median':>9}{'min':>9}{'max':>9}{'goal':>9}")
    for code, summary in summaries.items():
        for k in ("wall_s", "time_to_first_step_s", "time_to_target_s", "peak_pss_gib"):
            v = summary[k]
            print(f"{code[-44:]:<44}{k:<24}{v['median']:>9}{v['min']:>9}{v['max']:>9}{goal.get(k, ''):>9}")
    print(f"saved {save('startup', {'runs': runs, 'summary': summaries, 'goals': goal}, args, start_load=load_before)}")


if __name__ == "__main__":
    main()
