"""What running trials through Ray Tune costs, side by side with running them directly.

Two figures, printed and saved to benchmarks/results/tune_overhead.json:

1. Tune's own bookkeeping: N trials that only sleep `--sleep-s`, through our searcher
   at concurrency C, against the ideal N * sleep / C. Overhead per trial per slot =
   (wall - ideal) * C / N. Anchor: about 0.14 s (Ray's 10,000 1-second trials on 16
   CPUs: 715 s against 625 s).
2. echoray trials: `echoray tune` of N real digits trials at concurrency 1 and 2: each
   trial's wall time minus its training-loop time (first step to summary), the
   overhead the issue-16 goal bounds (< 5 s at concurrency 2). `--code` compares
   checkouts (e.g. /work/main/platform and this one's) in the same run.

    .venv/bin/python benchmarks/tune_overhead.py [--trivial 40] [--echoray 4] [--code A B]
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

from common import save

REPO = Path(__file__).resolve().parents[1]
PIPELINE = REPO / "pipelines" / "digits_search.yaml"


def sleeper(point, sleep_s: float) -> None:
    from ray import tune

    time.sleep(sleep_s)
    tune.report({"done_sleeping": 1, "index": point["index"]})


def trivial_trials(n: int, concurrency: int, sleep_s: float) -> dict:
    import ray
    from ray import tune

    from echoray.config import SearchConfig
    from echoray.tune.searcher import QuasiRandomSearcher
    from echoray.tune.space import SearchPoints

    points = SearchPoints(SearchConfig(space={"optimizer.lr": {"low": 0.01, "high": 1.0, "scale": "log"}}),
                          seed=0, trials=n, repeats=1)
    ray.init(num_cpus=concurrency, include_dashboard=False, logging_level="ERROR")
    with tempfile.TemporaryDirectory() as d:
        tuner = tune.Tuner(
            tune.with_resources(tune.with_parameters(sleeper, sleep_s=sleep_s), {"cpu": 1}),
            tune_config=tune.TuneConfig(search_alg=QuasiRandomSearcher(points), num_samples=n,
                                        max_concurrent_trials=concurrency, reuse_actors=True),
            run_config=tune.RunConfig(storage_path=d, name="bench", verbose=0))
        t0 = time.perf_counter()
        grid = tuner.fit()
        wall = time.perf_counter() - t0
    ray.shutdown()
    assert len(grid) == n and not grid.errors
    ideal = n * sleep_s / concurrency
    return {"trials": n, "concurrency": concurrency, "sleep_s": sleep_s, "wall_s": wall, "ideal_s": ideal,
            "overhead_per_trial_per_slot_s": (wall - ideal) * concurrency / n, "anchor_s": 0.14}


def echoray_trials(n: int, concurrency: int, code: str) -> dict:
    """`echoray tune` of n digits trials at `concurrency`, with the code under `code`.

    Per trial: its wall time (trial start to summary, run.train's wall_s) minus its
    training-loop time (first step to summary), and the search's wall per trial slot
    (search wall x concurrency / n) minus the mean loop time: what a trial costs beyond
    the training it does, with Tune's scheduling and the search's own start included."""
    exe = str(Path(sys.executable).parent / "echoray")
    env = {**os.environ, "PYTHONPATH": code}
    with tempfile.TemporaryDirectory() as d:
        uri = f"tracking.uri=sqlite:///{d}/mlflow.db"
        t0 = time.perf_counter()
        out = subprocess.run([exe, "tune", str(PIPELINE), "--trials", str(n), "--repeats", "1", "--out",
                              f"{d}/search", "--set", f"search.max_concurrent={concurrency}", "--set", uri],
                             capture_output=True, text=True, env=env)
        tune_wall = time.perf_counter() - t0
        if out.returncode:
            raise SystemExit(out.stdout[-3000:] + out.stderr[-3000:])
        runs = _trial_summaries(Path(d) / "search")
    walls = [r["wall_s"] for r in runs]
    loops = [r["wall_s"] - r["time_to_first_step_s"] for r in runs]
    overheads = [w - lp for w, lp in zip(walls, loops, strict=True)]
    return {"code": code, "trials": n, "concurrency": concurrency, "tune_wall_s": round(tune_wall, 1),
            "trial_wall_s": [round(w, 1) for w in walls], "trial_loop_s": [round(lp, 1) for lp in loops],
            "overhead_per_trial_s": round(statistics.mean(overheads), 1),
            "search_wall_per_slot_minus_loop_s": round(tune_wall * concurrency / n - statistics.mean(loops), 1)}


def _trial_summaries(search_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((search_dir / "trials").glob("*/summary.json"))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trivial", type=int, default=40, help="trivial trials (0 to skip)")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--sleep-s", type=float, default=1.0)
    ap.add_argument("--echoray", type=int, default=4, help="echoray digits trials per search (0 to skip)")
    ap.add_argument("--echoray-concurrency", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--code", nargs="+", default=[str(REPO / "platform")],
                    help="platform/ folders to compare (e.g. main's, then this checkout's)")
    args = ap.parse_args()
    load0, result = os.getloadavg(), {}
    if args.trivial:
        r = result["trivial"] = trivial_trials(args.trivial, args.concurrency, args.sleep_s)
        print(f"Tune bookkeeping: {r['trials']} x {r['sleep_s']} s trials at concurrency {r['concurrency']}: "
              f"{r['wall_s']:.1f} s against ideal {r['ideal_s']:.1f} s -> "
              f"{r['overhead_per_trial_per_slot_s']:.3f} s per trial per slot (anchor 0.14 s)")
    if args.echoray:
        result["echoray"] = []
        for c in args.echoray_concurrency:
            for code in args.code:
                r = echoray_trials(args.echoray, c, code)
                result["echoray"].append(r)
                print(f"{code}: {r['trials']} digits trials at concurrency {c}: search {r['tune_wall_s']} s; "
                      f"trial wall {r['trial_wall_s']} s, training loop {r['trial_loop_s']} s -> overhead "
                      f"{r['overhead_per_trial_s']} s per trial (goal < 5 s at concurrency 2); search wall "
                      f"per slot minus loop {r['search_wall_per_slot_minus_loop_s']} s", flush=True)
    print(f"saved {save('tune_overhead', result, args, start_load=load0)}")


if __name__ == "__main__":
    main()
