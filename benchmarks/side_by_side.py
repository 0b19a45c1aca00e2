"""The start-up, echo and input benchmarks of two commits, side by side in one run:
did a change that should not alter behaviour (issue 26's redesign) keep the figures?

Each commit is checked out into its own detached worktree under --work (this tree's
results files are not touched) and runs its own copy of each benchmark with its own
platform/ on PYTHONPATH, the two commits alternating part by part so a change of load
hits both alike. The figures are read from the results files each copy wrote and saved,
with the load average before and after every part, to benchmarks/results/NAME.json.

    .venv/bin/python benchmarks/side_by_side.py --before 5ea4ae8 [--after HEAD]
        [--parts startup,echo_overhead,echo_level,input] [--name side_by_side]

Parts (scaled to fit a session, as recorded in the file):
- startup: startup.py of --after with --code before/platform after/platform, both
  trainers (in the CLI's process, a Ray Train worker group), --startup-repeats each;
- echo_overhead: echo.py --overhead-only (the echo op at e = 1 against none, 5 rounds);
- echo_level: echo.py --r 4 --seeds 0 --factors 1,2,4 (one seed of the R = 4 level);
- input: input_pipeline.py --parts compare --repeats 1 (echoray against a DataLoader);
- first_batch: first_batch.py --parts digits_store --repeats --first-batch-repeats (digits
  behind the emulated store, each arm its commit's file holds: the first read and the first step;
  --first-batch-in-process: trained in process, as `echoray train` on a Ray it starts).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from common import REPO, save, settled_load

PARTS = ("startup", "echo_overhead", "echo_level", "input", "first_batch")


def worktree(commit: str, work: Path) -> Path:
    """A detached worktree of `commit` under `work` (made once, reused)."""
    sha = subprocess.run(["git", "rev-parse", "--short", commit], cwd=REPO, check=True, capture_output=True,
                         text=True).stdout.strip()
    path = work / sha
    if not (path / "platform").is_dir():
        subprocess.run(["git", "worktree", "add", "--detach", str(path), sha], cwd=REPO, check=True,
                       capture_output=True)
    return path


def run_script(tree: Path, *argv: str) -> None:
    env = {**os.environ, "PYTHONPATH": f"{tree / 'platform'}{os.pathsep}{tree / 'benchmarks'}"}
    env.pop("ECHORAY_BENCH_RESULTS", None)
    out = subprocess.run([sys.executable, *argv], cwd=tree, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(argv)} failed ({out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-3000:]}")


def result(tree: Path, name: str) -> dict:
    return json.loads((tree / "benchmarks" / "results" / f"{name}.json").read_text())


def startup(trees: dict[str, Path], repeats: int) -> dict:
    after = trees["after"]
    run_script(after, "benchmarks/startup.py", "--repeats", str(repeats), "--code",
               *(str(t / "platform") for t in trees.values()), "--trainers", "auto", "false")
    summary = result(after, "startup")["summary"]
    out = {}
    for label, tree in trees.items():
        for trainer in ("auto", "false"):
            s = summary[f"{tree / 'platform'} in_process={trainer}"]
            out[f"{label} in_process={trainer}"] = {k: s[k]["median"] for k in
                                                    ("wall_s", "time_to_first_step_s", "time_to_target_s",
                                                     "peak_pss_gib")}
    return out


def echo_overhead(tree: Path) -> dict:
    run_script(tree, "benchmarks/echo.py", "--overhead-only")
    o = result(tree, "echo")["pipeline_overhead"]
    return {"rows_per_s_without_echo": statistics.median(o["rows_per_s_without_echo"]),
            "rows_per_s_with_echo_e1": statistics.median(o["rows_per_s_with_echo_e1"]),
            "overhead_fraction": o["overhead_fraction"]}


def echo_level(tree: Path) -> dict:
    run_script(tree, "benchmarks/echo.py", "--r", "4", "--seeds", "0", "--factors", "1,2,4")
    d = result(tree, "echo_R4")
    return {"measured_R": d["R"], "factors": {
        row["factor"]: {k: row[k]["mean"] for k in ("fresh_examples_to_target", "time_to_target_speedup",
                                                     "step_rate_speedup") if k in row}
        for row in d["rows"]}}


def input_compare(tree: Path) -> dict:
    run_script(tree, "benchmarks/input_pipeline.py", "--parts", "compare", "--repeats", "1")
    c = result(tree, "input_pipeline")["compare"]
    runs = c["runs"]
    # keys without "load": a load checker reads any key naming it as a load average
    base = "torch_baseline" if "torch_baseline" in runs else "dataloader"  # "dataloader": a commit before the rename
    return {"echoray_vs_torch_baseline": c[f"echoray_vs_{base}"]["median"],
            "echoray_examples_per_s": runs["echoray"][0]["examples_per_s"],
            "torch_baseline_examples_per_s": runs[base][0]["examples_per_s"],
            "echoray_first_batch_s": runs["echoray"][0]["first_batch_s"]}


def first_batch(tree: Path, repeats: int, in_process: bool = False) -> dict:
    run_script(tree, "benchmarks/first_batch.py", "--parts", "digits_store", "--repeats", str(repeats),
               *(["--in-process"] if in_process else []))
    d = result(tree, "first_batch")["digits_store"]
    return {pacing: {"median": d["median"][pacing],
                     "time_to_first_step_s": [r["time_to_first_step_s"] for r in runs],
                     "time_to_first_read_s": [r["time_to_first_read_s"] for r in runs]}
            for pacing, runs in d["runs"].items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the earlier commit")
    ap.add_argument("--after", default="HEAD")
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--startup-repeats", type=int, default=2)
    ap.add_argument("--first-batch-repeats", type=int, default=3)
    ap.add_argument("--first-batch-in-process", action="store_true",
                    help="first_batch.py --in-process: the digits runs train in process (both commits need the flag)")
    ap.add_argument("--work", default="/tmp/echoray-side-by-side", help="where the worktrees go")
    ap.add_argument("--name", default="side_by_side")
    args = ap.parse_args()
    parts = args.parts.split(",")
    if not set(parts) <= set(PARTS):
        ap.error(f"--parts: a subset of {','.join(PARTS)}, got {args.parts}")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    trees = {"before": worktree(args.before, work), "after": worktree(args.after, work)}
    per_tree = {"echo_overhead": echo_overhead, "echo_level": echo_level, "input": input_compare,
                "first_batch": lambda tree: first_batch(tree, args.first_batch_repeats, args.first_batch_in_process)}
    record: dict = {"commits": {k: t.name for k, t in trees.items()}}
    start = os.getloadavg()
    for part in parts:
        load0 = settled_load()
        if part == "startup":
            figures = startup(trees, args.startup_repeats)
        else:
            figures = {label: per_tree[part](tree) for label, tree in trees.items()}
        record[part] = {"figures": figures, "load_before": load0[0], "load_after": settled_load()[0]}
        print(part, json.dumps(record[part]), flush=True)
    print(f"saved {save(args.name, record, args, start_load=start, end_load=os.getloadavg())}")


if __name__ == "__main__":
    main()
