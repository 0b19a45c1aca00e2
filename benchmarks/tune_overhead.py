"""What running trials through Ray Tune costs, side by side with running them directly.

Two figures, printed and saved to benchmarks/results/tune_overhead.json:

1. Tune's own bookkeeping: N trials that only sleep `--sleep-s`, through our searcher
   at concurrency C, against the ideal N * sleep / C. Overhead per trial per slot =
   (wall - ideal) * C / N. Anchor: about 0.14 s (Ray's 10,000 1-second trials on 16
   CPUs: 715 s against 625 s).
2. echoray trials: `echoray tune` of N digits trials one at a time, against the same
   runs' own wall time inside their trials and against a standalone `echoray train`
   of one point: what a trial costs beyond the training run it wraps.

    .venv/bin/python benchmarks/tune_overhead.py [--trivial 40] [--echoray 4]
"""

from __future__ import annotations

import argparse
import json
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


def echoray_trials(n: int) -> dict:
    exe = str(Path(sys.executable).parent / "echoray")
    with tempfile.TemporaryDirectory() as d:
        uri = f"tracking.uri=sqlite:///{d}/mlflow.db"
        t0 = time.perf_counter()
        out = subprocess.run([exe, "tune", str(PIPELINE), "--trials", str(n), "--repeats", "1", "--out",
                              f"{d}/search", "--set", "search.max_concurrent=1", "--set", uri],
                             capture_output=True, text=True)
        tune_wall = time.perf_counter() - t0
        if out.returncode:
            raise SystemExit(out.stdout[-3000:] + out.stderr[-3000:])
        summary = json.loads(Path(f"{d}/search/summary.json").read_text())
        inside = [t for t in (r.get("wall_s") for r in _trial_summaries(Path(d) / "search")) if t]
        first = summary["trials"][0]["params"]
        sets = [x for k, v in first.items() for x in ("--set", f"{k}={v}")]
        t1 = time.perf_counter()
        alone = subprocess.run([exe, "train", str(PIPELINE), *sets, "--set", uri, "--out", f"{d}/alone"],
                               capture_output=True, text=True)
        alone_wall = time.perf_counter() - t1
        if alone.returncode:
            raise SystemExit(alone.stdout[-3000:] + alone.stderr[-3000:])
    return {"trials": n, "tune_wall_s": tune_wall, "trial_train_wall_s": inside,
            "sum_trial_train_wall_s": sum(inside),
            "overhead_per_trial_s": (tune_wall - sum(inside)) / n,
            "standalone_train_wall_s": alone_wall,
            "tune_wall_per_trial_vs_standalone": tune_wall / n / alone_wall}


def _trial_summaries(search_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((search_dir / "trials").glob("*/summary.json"))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trivial", type=int, default=40, help="trivial trials (0 to skip)")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--sleep-s", type=float, default=1.0)
    ap.add_argument("--echoray", type=int, default=4, help="echoray digits trials (0 to skip)")
    args = ap.parse_args()
    result = {}
    if args.trivial:
        r = result["trivial"] = trivial_trials(args.trivial, args.concurrency, args.sleep_s)
        print(f"Tune bookkeeping: {r['trials']} x {r['sleep_s']} s trials at concurrency {r['concurrency']}: "
              f"{r['wall_s']:.1f} s against ideal {r['ideal_s']:.1f} s -> "
              f"{r['overhead_per_trial_per_slot_s']:.3f} s per trial per slot (anchor 0.14 s)")
    if args.echoray:
        r = result["echoray"] = echoray_trials(args.echoray)
        print(f"echoray trials: {r['trials']} digits trials one at a time in {r['tune_wall_s']:.1f} s; the training "
              f"runs inside took {r['sum_trial_train_wall_s']:.1f} s (median {statistics.median(r['trial_train_wall_s']):.1f} s) "
              f"-> {r['overhead_per_trial_s']:.1f} s per trial around the run; a standalone `echoray train` "
              f"of one point took {r['standalone_train_wall_s']:.1f} s "
              f"(tune wall per trial / standalone = {r['tune_wall_per_trial_vs_standalone']:.2f})")
    print(f"saved {save('tune_overhead', result)}")


if __name__ == "__main__":
    main()
