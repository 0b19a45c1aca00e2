"""An emulated accelerator faster than its input pipeline, kept busy (issue 60).

The model is benchmarks/accelerator_model.py by import path (form "wait": each training
step takes us_per_sample per sample of device time, queued one step ahead of the host as
on a GPU stream, --queue-steps; time the CPU does not spend), trained by
`echoray train pipelines/imagenet_resnet50.yaml` on an ImageNet-like JPEG folder
(benchmarks/jpeg_set.py; decode + random-resized crop 224 + flip on 2 actors of 0.75 CPU,
Ray Train workers of 0.5 CPU together, batch 64, 8 epochs of reads). Two accelerator speeds
(accelerator_model.SETTINGS): R3 = the published A100 ResNet-50 AMP rate (2,470 images/s),
R6 = twice it. Arms, per speed and per worker count (scaling.num_workers 1 and 2):

- e1: no echo;
- {before_augment, after_augment, batch}_e{2,4,8}: a fixed factor at each placement;
- {before_augment, after_augment, batch}_auto: echo.factor auto at each placement;
- dataloader (one worker count only): a torch DataLoader of 2 processes with echoray's
  decoder feeding the same accelerator (benchmarks/accelerator_dataloader.py), no echo.

Per run, from the accelerator's own log (accelerator_model.busy_fraction, per worker):
busy = time in steps over the span from its first step's start to its last step's end
(evaluation taken out of the span; busy_raw keeps it in), trained examples/s = samples the
steps trained over that span, fresh examples/s = the summary's fresh examples over it; and
where rank 0's loop spent its time (loop_profile: steps, waiting for input, evaluations, the rest).
R = the accelerator's rate (all workers) over e1's fresh rate. Goals (issue 60): auto
busy >= 0.9 at R3 and R6 and within 10% of the best fixed factor's; e1 busy about 1/R.
Arms interleave: each repeat runs every arm, in reversed order every other repeat.

    python benchmarks/accelerator.py                  # the full run (see docs/benchmarks/accelerator.md)
    python benchmarks/accelerator.py --quick          # (or --smoke) 200 files, 2 epochs, 3 arms, R3, 1 worker
    python benchmarks/accelerator.py --form padded --target pilot --evals-per-epoch 2 --name accelerator_ttt

--form padded trains the learning accelerator (a small CNN padded to the set time) on
class-tinted JPEGs (jpeg_set.jpeg_folder(tints=TINTS)), to --target held-out accuracy: time
to target is wall clock from the run's start (and from its first step), a miss counted at
its run's end (reached: how many of the repeats reached it). `--target pilot` fixes the
target before the measured runs (issue 64): an e = 1 run of seed PILOT_SEED (not a measured
seed) at R3 without a target, its held-out accuracy at the evaluation nearest PILOT_AT of
its budget; the pilot's curve is kept in the results file.

Writes benchmarks/results/accelerator.json (--quick: accelerator_quick.json), its
`busy_fraction` the one-worker medians of e1, the auto arms and the DataLoader, per setting.
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

import common
import numpy as np
from accelerator_model import SETTINGS, busy_fraction, read_busy
from common import REPO, save, settled_load, train_in_process
from jpeg_set import jpeg_folder
from ttt import PILOT_AT, PILOT_SEED, pilot_value

BENCH = Path(__file__).resolve().parent
PLACEMENTS = ("before_augment", "after_augment", "batch")
FIXED = (2, 4, 8)
WORKER_CPUS = 0.5  # logical CPUs of the train workers together: two workers 0.25 each, on the same cores
TINTS = np.random.default_rng(1).uniform(-48, 48, (10, 3))  # --form padded: classes a small CNN tells apart
COMMON = ["source.eval_path=null", "source.holdout_fraction=0.05",
          "preprocess.actors={min_size: 2, max_size: 2, num_cpus: 0.75}", "scaling.use_gpu=false",
          "scaling.local_mode=false", "train.batch_size=64",
          "train.precision=fp32", "train.channels_last=false", "train.checkpoint_every=0", "scaling.max_failures=0",
          "echo.max_factor=8"]


def arm_overrides(arm: str) -> list[str]:
    """echo.* overrides of an arm name: e1, PLACEMENT_eN, PLACEMENT_auto."""
    if arm == "e1":
        return ["echo.stage=none", "echo.factor=1"]
    placement, factor = arm.rsplit("_", 1)
    return [f"echo.stage={placement}", f"echo.factor={factor.removeprefix('e')}"]


def all_arms() -> list[str]:
    return ["e1", *(f"{p}_e{e}" for p in PLACEMENTS for e in FIXED), *(f"{p}_auto" for p in PLACEMENTS)]


def accelerator_figures(busy_dir: str, fresh: int | None) -> dict:
    """busy (mean and min over workers), trained and fresh examples/s over the workers' span."""
    logs = read_busy(busy_dir)
    procs = [busy_fraction(p) for p in logs]
    if not procs:
        raise RuntimeError(f"the accelerator logged no step under {busy_dir}")
    start = min(p["train"][0][0] for p in logs)
    end = max(p["train"][-1][1] for p in logs)
    span = end - start - statistics.fmean(p["eval_s"] for p in procs)
    samples = sum(p["samples"] for p in procs)
    return {"busy": statistics.fmean(p["busy"] for p in procs), "busy_min": min(p["busy"] for p in procs),
            "busy_raw": statistics.fmean(p["busy_raw"] for p in procs), "workers_logged": len(procs),
            "trained_per_s": samples / span, "fresh_per_s": fresh / span if fresh is not None else None,
            "span_s": span, "per_worker": procs}


def run_overrides(arm: str, setting: str, workers: int, root: Path, args: argparse.Namespace, seed: int,
                  busy: str) -> list[str]:
    """The `echoray train` overrides of one run (its accelerator logging into `busy`)."""
    target = "null" if args.target is None else args.target
    return [*COMMON, f"source.path={root}", f"train.max_epochs={args.epochs}", f"seed={seed}",
            f"scaling.num_workers={workers}", f"scaling.cpus_per_worker={WORKER_CPUS / workers}",
            "model.name=accelerator_model:factory",
            f'model.kwargs={{"us_per_sample": {SETTINGS[setting][1]}, "form": "{args.form}", "busy_log": "{busy}", '
            f'"queue_steps": {queue_steps(args)}}}',
            f"train.target={target}", f"train.evals_per_epoch={args.evals_per_epoch}", *arm_overrides(arm)]


def ray_run(arm: str, setting: str, workers: int, root: Path, args: argparse.Namespace, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as busy:
        overrides = run_overrides(arm, setting, workers, root, args, seed, busy)
        summary, peak = train_in_process(overrides, f"{arm}-{setting}-w{workers}-s{seed}")
        figs = accelerator_figures(busy, summary["fresh_examples"])
    return {"arm": arm, "setting": setting, "workers": workers, "seed": seed, **figs,
            "target_reached": summary["target_reached"], "time_to_target_s": summary["time_to_target_s"],
            "accuracy": summary["metric"]["value"],
            "fresh_examples": summary["fresh_examples"], "trained_samples": summary["trained_samples"],
            "measured_factor": summary["echo"]["measured_factor"], "final_factor": summary["echo"]["final_factor"],
            "summary_measured_R": summary["measured_R"], "wall_s": summary["wall_s"],
            "time_to_first_step_s": summary["time_to_first_step_s"], "peak_pss_gib": peak / 2**30,
            "loop": loop_profile(summary),
            "evaluations": [{k: h.get(k) for k in ("evaluation", "epoch", "accuracy", "train_s")}
                            for h in summary.get("history", [])]}


def loop_profile(summary: dict) -> dict:
    """Where rank 0's training loop spent its time (seconds and shares of the loop): in steps
    (the host's step calls, which block while the accelerator is a step ahead), waiting for
    its next batch (the input pipeline), in evaluations, and the rest (its own bookkeeping)."""
    loop, wait, step, ev = (summary.get(k) for k in ("train_loop_s", "input_wait_s", "step_s", "eval_s"))
    if not loop or wait is None or step is None:
        return {}
    parts = {"step_s": step, "input_wait_s": wait, "eval_s": ev or 0.0}
    parts["other_s"] = max(loop - sum(parts.values()), 0.0)
    return {"loop_s": loop, **parts, **{k.removesuffix("_s") + "_share": v / loop for k, v in parts.items()}}


def pilot_target(root: Path, args: argparse.Namespace) -> dict:
    """--target pilot: run e = 1 (seed PILOT_SEED, R3, no target) and take its held-out
    accuracy at the evaluation nearest PILOT_AT of its budget as the measured runs' target."""
    run = ray_run("e1", "R3", 1, root, argparse.Namespace(**{**vars(args), "target": None}), PILOT_SEED)
    return {**pilot_value(run["evaluations"], "accuracy"), "setting": "R3", "evaluations": run["evaluations"],
            "wall_s": run["wall_s"]}


def queue_steps(args: argparse.Namespace) -> int:
    return args.queue_steps if args.form == "wait" else 0  # the padded form computes: synchronous


def dataloader_run(setting: str, root: Path, args: argparse.Namespace, seed: int) -> dict:
    us = SETTINGS[setting][1]
    with tempfile.TemporaryDirectory() as busy:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "platform"), str(BENCH)])}
        out = subprocess.run([sys.executable, str(BENCH / "accelerator_dataloader.py"), str(root), str(us),
                              str(args.epochs), busy, "--queue-steps", str(queue_steps(args))],
                             capture_output=True, text=True, env=env, check=True)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        figs = accelerator_figures(busy, res["examples"])  # no echo: every example is fresh
    return {"arm": "dataloader", "setting": setting, "workers": 1, "seed": seed, **figs, **res}


def summarise(runs: list[dict]) -> list[dict]:
    """Medians over repeats per (setting, workers, arm), R against e1, the goals checked."""
    rows = {}
    for r in runs:
        rows.setdefault((r["setting"], r["workers"], r["arm"]), []).append(r)
    out = []
    for (setting, workers, arm), rs in rows.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("busy", "busy_min", "trained_per_s")}
        fresh = [r["fresh_per_s"] for r in rs if r["fresh_per_s"] is not None]
        # time to target: wall clock from the command's start; a miss counts at its run's end (the budget)
        ttt = [r["time_to_target_s"] if r.get("target_reached") else r["wall_s"] for r in rs]
        out.append({"setting": setting, "workers": workers, "arm": arm, "repeats": len(rs), **med,
                    "reached": sum(bool(r.get("target_reached")) for r in rs),
                    "time_to_target_median_s": statistics.median(ttt),
                    "from_first_step_median_s": statistics.median(
                        t - r.get("time_to_first_step_s", 0.0) for t, r in zip(ttt, rs, strict=True)),
                    "fresh_per_s": statistics.median(fresh) if fresh else None,
                    "measured_factor": statistics.median(r.get("measured_factor") or 1.0 for r in rs),
                    **loop_medians(rs)})
    for row in out:
        base = next((b for b in out if (b["setting"], b["workers"], b["arm"]) ==
                     (row["setting"], row["workers"], "e1")), None)
        accel = row["workers"] * 1e6 / SETTINGS[row["setting"]][1]
        row["R"] = accel / base["fresh_per_s"] if base and base["fresh_per_s"] else None
    return out


def loop_medians(runs: list[dict]) -> dict:
    """Medians over runs of the loop's shares (loop_profile), where the runs logged them."""
    profiles = [r["loop"] for r in runs if r.get("loop")]
    keys = ("step_share", "input_wait_share", "eval_share", "other_share")
    return {f"loop_{k}": statistics.median(p[k] for p in profiles) for k in keys} if profiles else {}


def run_cpu(runs: list[dict]) -> dict:
    """Over the runs: the busiest machine before one, the most other processes took of one,
    and the median of the runs' own cores (of os.cpu_count())."""
    return {"busy_cores_before_max": max(r["busy_cores_before"] for r in runs),
            "foreign_cpu_share_max": max(r["cpu"]["foreign_cpu_share"] for r in runs),
            "own_cores_median": statistics.median(r["cpu"]["own_cores"] for r in runs)}


def goals(rows: list[dict]) -> list[dict]:
    """auto >= 0.9 busy and within 10% of the best fixed factor's busy, per placement."""
    checks = []
    for row in (r for r in rows if r["arm"].endswith("_auto")):
        placement = row["arm"].removesuffix("_auto")
        fixed = [r["busy"] for r in rows if (r["setting"], r["workers"]) == (row["setting"], row["workers"])
                 and r["arm"].startswith(placement + "_e")]
        best = max(fixed, default=None)
        checks.append({"setting": row["setting"], "workers": row["workers"], "arm": row["arm"],
                       "busy": row["busy"], "best_fixed_busy": best, "busy_ge_0_9": row["busy"] >= 0.9,
                       "within_10pct_of_best": None if best is None else row["busy"] >= 0.9 * best})
    return checks


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", "--smoke", dest="quick", action="store_true",
                    help="smoke: 200 files, 2 epochs, 3 arms, R3, 1 worker")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--settings", default="R3,R6")
    ap.add_argument("--workers", default="1,2", help="scaling.num_workers values")
    ap.add_argument("--arms", default=",".join(all_arms()))
    ap.add_argument("--no-dataloader", action="store_true")
    ap.add_argument("--form", choices=("wait", "padded"), default="wait",
                    help="padded: the learning accelerator on class-tinted JPEGs (time to target)")
    ap.add_argument("--target", default=None,
                    help="train.target (with --form padded): a held-out accuracy, or `pilot` (PILOT_SEED's e = 1 "
                         f"run at {PILOT_AT * 100:.0f}%% of its budget)")
    ap.add_argument("--evals-per-epoch", type=int, default=1, help="train.evals_per_epoch")
    ap.add_argument("--queue-steps", type=int, default=1,
                    help="form wait: steps the host may run ahead of the device (0: synchronous steps)")
    ap.add_argument("--name", default="accelerator")
    args = ap.parse_args()
    if args.quick:
        args.files, args.epochs, args.repeats, args.settings, args.workers = 200, 2, 1, "R3", "1"
        args.arms, args.name = "e1,after_augment_e2,batch_auto", "accelerator_quick"
    if args.target not in (None, "pilot"):
        args.target = float(args.target)
    bad = set(args.arms.split(",")) - set(all_arms())
    if bad or set(args.settings.split(",")) - set(SETTINGS):
        ap.error(f"--arms from {','.join(all_arms())}; --settings from {','.join(SETTINGS)}")
    return args


def main() -> None:
    args = parse()
    # The workers import accelerator_model by its import path: benchmarks/ on their PYTHONPATH.
    os.environ["PYTHONPATH"] = os.pathsep.join([str(BENCH), os.environ.get("PYTHONPATH", "")])
    common.PIPELINE = str(REPO / "pipelines" / "imagenet_resnet50.yaml")
    root = jpeg_folder(args.files, tints=TINTS if args.form == "padded" else None)
    from echoray.runtime.session import start_ray

    start_ray()
    load0 = os.getloadavg()
    plan = [(s, w, a) for s in args.settings.split(",") for w in map(int, args.workers.split(","))
            for a in args.arms.split(",")]
    plan += [] if args.no_dataloader or args.form == "padded" else [(s, 1, "dataloader") for s in args.settings.split(",")]
    pilot = None
    if args.target == "pilot":
        settled_load(timeout_s=5 if args.quick else 120)
        pilot = pilot_target(root, args)
        args.target = pilot["target"]
        print(f"pilot e1 seed {PILOT_SEED}: target {args.target} (evaluation {pilot['at_evaluation']} "
              f"of {pilot['of']})", flush=True)
    runs = []
    for rep in range(args.repeats):
        for setting, workers, arm in plan if rep % 2 == 0 else plan[::-1]:
            before = common.quiet_machine(timeout_s=5 if args.quick else 120)
            t = time.time()
            with common.RunCpu() as use:
                r = (dataloader_run(setting, root, args, rep) if arm == "dataloader"
                     else ray_run(arm, setting, workers, root, args, rep))
            # busy_cores_before: the machine in the 2 s before the run; cpu: the run's own cores
            # (its actors, worker and Ray: about 2 of 2) and other processes' share of the busy CPU.
            runs.append({**r, "repeat": rep, "busy_cores_before": before, "cpu": use.record})
            print(f"{setting} w{workers} {arm} rep {rep}: busy {r['busy']:.3f} trained {r['trained_per_s']:.0f}/s "
                  f"fresh {r['fresh_per_s'] or 0:.0f}/s ({time.time() - t:.0f} s)", flush=True)
    rows = summarise(runs)
    end_load = settled_load(timeout_s=5 if args.quick else 120)  # after the last run's Ray, as at the start
    headline = {f"{r['setting']} {r['arm']}": r["busy"] for r in rows  # make bench's report (report.py)
                if r["workers"] == 1 and (r["arm"] in ("e1", "dataloader") or r["arm"].endswith("_auto"))}
    out = {"busy_fraction": headline, "queue_steps": queue_steps(args), "form": args.form, "settings": {k: {"scale_of_a100_rn50_amp": v[0], "us_per_sample": v[1]} for k, v in SETTINGS.items()},
           "files": args.files, "epochs": args.epochs, "target": args.target, "pilot": pilot,
           "rows": rows, "goals": goals(rows), "run_cpu": run_cpu(runs), "runs": runs}
    print(save(args.name, out, args, start_load=load0, end_load=end_load, seeds=list(range(args.repeats)), repeats=args.repeats))


if __name__ == "__main__":
    main()
