"""The data-echoing paper's Figure 3 on digits: `echoray study` over the echo variants,
each a quasi-random search repeated `--repeats` times, then its report.

Saves benchmarks/results/echo_study.json (the report's numbers, per-variant spreads, wall
time) and benchmarks/results/echo_study_figure3.png.

    .venv/bin/python benchmarks/echo_study.py [--trials 4] [--repeats 5] [--out runs/echo-study]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import RESULTS, save, settled_load

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--variants", default="baseline,before_augment:2,after_augment:2,batch:2")
    ap.add_argument("--out", default="runs/echo-study")
    ap.add_argument("--resume", action="store_true", help="continue an interrupted study in --out")
    args = ap.parse_args()
    exe = str(Path(sys.executable).parent / "echoray")
    cmd = ([exe, "study", "--resume", args.out] if args.resume else
           [exe, "study", str(REPO / "pipelines" / "digits_search.yaml"), "--out", args.out,
            "--trials", str(args.trials), "--repeats", str(args.repeats), "--variants", args.variants,
            "--set", "train.evals_per_epoch=4"])  # fresh examples to target to 1/4 epoch, not 1
    load_before = os.getloadavg()
    t0 = time.time()
    subprocess.run(cmd, check=True)
    wall = time.time() - t0
    report = json.loads((Path(args.out) / "report.json").read_text())
    shutil.copy(Path(args.out) / "figure3_fresh_examples.png", RESULTS / "echo_study_figure3.png")
    rows = [{k: r[k] for k in ("variant", "label", "factor", "fresh_examples_to_target", "relative",
                               "best_accuracy", "repeats_without_a_best")} for r in report["variants"]]
    print(f"{'variant':<24} {'fresh to target: mean [min, max]':>34} {'relative [min, max]':>22} {'1/e':>6}")
    for r in rows:
        f, rel = r["fresh_examples_to_target"], r["relative"]
        if not f["n"]:
            print(f"{r['label']:<24} {'no repeat reached the target':>34}")
            continue
        print(f"{r['label']:<24} {f['mean']:>14,.0f} [{f['min']:,.0f}, {f['max']:,.0f}]"
              f"   {rel['mean']:.3f} [{rel['min']:.3f}, {rel['max']:.3f}] {1 / r['factor']:>6.3f}")
    print(f"study wall time {wall / 60:.1f} min (this run; a resumed run counts only its part)")
    # a resumed study's start load is this invocation's: the interrupted part's is not known
    # The end reading once the study's own trials have wound down (common.settled_load): its
    # 80 trials hold the 1-minute load near 3.3 on 2 cores with nothing else running.
    save("echo_study", {"title": report["title"], "variants": rows, "wall_s": wall, "resumed": args.resume},
         args, start_load=load_before, end_load=settled_load())


if __name__ == "__main__":
    main()
