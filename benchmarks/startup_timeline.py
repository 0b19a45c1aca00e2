"""Where the seconds of `echoray train` go, from command start to the first step.

Runs `echoray train` (the embedded digits pipeline) in a child process whose driver
records when it enters and leaves the start-up phases of run.train (start_ray, the
warm-up imports, opening the MLflow run, entering the fit) and, before Ray shuts
down, Ray's own timeline (`ray.timeline()`: when each actor's constructor ran, in
which process). Works on any checkout of the code (`--code DIR/platform`), so the
timeline of the code before a change can be taken beside the one after.

    python benchmarks/startup_timeline.py [--code /path/to/other/platform] [--label before]
        [--trainer auto|false]   (scaling.local_mode: auto trains the one worker in the CLI's process)

Saves benchmarks/results/startup_timeline_<label>.json and prints one line per phase.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
# Actor constructors on the path to the first step, in the order Ray Train runs them.
ACTORS = ("RunCollector.__init__", "TrainController.__init__", "RayTrainWorker.__init__",
          "RayTrainWorker.init_train_context", "DatasetManager.__init__", "SplitCoordinator.__init__",
          "MapWorker(MapBatches(Preprocess)).__init__")
DRIVER_PHASES = ("start_ray", "_warm_up", "_open_mlflow_run", "watch_fit")


def child(argv: list[str], out: str) -> int:
    """The traced driver: run.train's phases wrapped with timestamps, Ray's timeline kept."""
    t0 = float(os.environ["ECHORAY_T0"])
    import echoray.cli as cli
    import echoray.run as run

    marks: list[dict] = []

    def traced(name, fn):
        def wrapper(*a, **k):
            start = time.time()
            try:
                return fn(*a, **k)
            finally:
                marks.append({"phase": name, "start": start - t0, "end": time.time() - t0})
        return wrapper

    for name in DRIVER_PHASES:
        if hasattr(run, name):
            setattr(run, name, traced(name, getattr(run, name)))
    shutdown = cli._shutdown_ray

    def keep_timeline() -> None:
        import ray

        events = ray.timeline() if ray.is_initialized() else []
        Path(out).write_text(json.dumps({"marks": marks, "ray": events, "t_shutdown": time.time() - t0}))
        shutdown()

    cli._shutdown_ray = keep_timeline
    return cli.main(argv)


def phases(trace: dict, t0: float, summary: dict) -> list[tuple[str, float, float]]:
    """(what, start s, end s) from command start, sorted by start."""
    rows = [(f"driver: {m['phase']}", m["start"], m["end"]) for m in trace["marks"]]
    first: dict[str, tuple[float, float]] = {}
    for e in trace["ray"]:
        cat = str(e.get("cat", ""))
        if e.get("ph") != "X" or not cat.startswith("task::"):
            continue
        name = cat.removeprefix("task::")
        if name in ACTORS and name not in first:
            start = e["ts"] / 1e6 - t0
            first[name] = (start, start + e["dur"] / 1e6)
    rows += [(f"actor: {n}", *first[n]) for n in ACTORS if n in first]
    fs = summary.get("time_to_first_step_s")
    if fs is not None:
        rows.append(("first training step", fs, fs))
    rows.append(("training ends, summary written", summary["wall_s"], summary["wall_s"]))
    return sorted(rows, key=lambda r: r[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code", default=str(REPO / "platform"), help="the platform/ folder to time")
    ap.add_argument("--label", default="after")
    ap.add_argument("--trainer", choices=["auto", "true", "false"], help="scaling.local_mode for the run")
    ap.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        sys.exit(child(args.child[1:], args.child[0]))
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "PYTHONPATH": args.code}
        trace_file = f"{d}/trace.json"
        t0 = time.time()
        env["ECHORAY_T0"] = repr(t0)
        proc = subprocess.run([sys.executable, __file__, "--child", trace_file, "train", "--out", "run",
                               "--set", f"tracking.uri=sqlite:///{d}/mlflow.db",
                               *(["--set", f"scaling.local_mode={args.trainer}"] if args.trainer else [])],
                              cwd=d, env=env, capture_output=True, text=True)
        wall = time.time() - t0
        if proc.returncode:
            raise SystemExit(proc.stdout[-3000:] + proc.stderr[-3000:])
        trace = json.loads(Path(trace_file).read_text())
        summary = json.loads((Path(d) / "run" / "summary.json").read_text())
    rows = phases(trace, t0, summary)
    rows.append(("command exits (Ray shut down)", wall, wall))
    for what, start, end in rows:
        span = f"-> {end:5.1f}  ({end - start:4.1f} s)" if end > start + 0.05 else ""
        print(f"{start:6.1f} s  {what:<44} {span}")
    # common is imported here, not at the top: the child must import only --code's platform
    sys.path.insert(0, str(Path(__file__).parent))
    from common import save

    path = save(f"startup_timeline_{args.label}", {
        "code": args.code, "wall_s": wall,
        "phases": [{"what": w, "start_s": round(s, 2), "end_s": round(e, 2)} for w, s, e in rows]},
        args, start_load=load0)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
