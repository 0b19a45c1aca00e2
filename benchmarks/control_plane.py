"""The run's control plane under load: what one collector actor (runtime/collector.py
RunCollector) takes from 32 preprocessing actors and 8 train workers as the block rate
grows, before and after runtime/collector_feed.py (docs/benchmarks/control-plane.md).

A local Ray whose logical CPUs are shared out in 0.05s, as on a cluster whose many actors
each hold a little CPU: every caller is an actor of num_cpus=0.05, the collector is a
real RunCollector (echo.factor auto, so heartbeats run its control law) of num_cpus=0.
No data moves: only the calls a run makes to its collector, at the rates a run makes them.

    per_call   the pattern before: per block, a blocking echo_factor request and two
               stage reports (upstream, downstream: auto's echo before augmentation),
               each a reports call of its own
    batched    the product's CollectorFeed per actor: the same three figures per block,
               batched into one reports call every 0.5 s at most, the factor from its replies
Train workers, the same in both: per step a heartbeat and a live-factor request, each
skipped while the previous reply is out (worker/link.py's pattern).

Recorded per arm (mode x block rate): blocks_per_s (all actors, achieved),
collector_calls_per_s (calls the callers sent), collector_cpu_s (user + system CPU of the
collector's process over the arm, psutil), collector_cpu_s_per_call, and
projection_1000_actors: calls/s and the collector's CPU share at 1,000 actors from the
arm's calls per actor and its per-call cost.

    .venv/bin/python benchmarks/control_plane.py [--rates 10 40] [--duration 20] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import time

import psutil
from common import save

CALLER_CPUS = 0.05
ROWS = 128  # rows per block
BLOCK_BUSY_S = 0.01  # the busy seconds a block reports (the actor really sleeps its period)


def collector_class():
    import ray

    from echoray.runtime.collector import RunCollector

    class BenchCollector(RunCollector.__ray_actor_class__):
        def pid(self) -> int:
            return os.getpid()

    return ray.remote(num_cpus=0, max_restarts=0)(BenchCollector)


def paced(until: float, rate: float, step) -> int:
    """Call step() `rate` times a second until the wall clock reaches `until`; the count."""
    n, period, due = 0, 1.0 / rate, time.time()
    while time.time() < until:
        step()
        n += 1
        due += period
        time.sleep(max(0.0, due - time.time()))
    return n


def caller_classes():
    import ray

    @ray.remote(num_cpus=CALLER_CPUS)
    class Preprocessor:
        """A preprocessing actor's calls to the collector, one block at a time."""

        def run(self, collector, name: str, mode: str, until: float, rate: float) -> dict:
            from echoray.runtime.collector_feed import CollectorFeed

            calls = [0]

            def send(method, *args):
                calls[0] += 1
                return getattr(collector, method).remote(*args).future()

            if mode == "batched":
                feed = CollectorFeed(send, name, float(send("echo_factor").result()), 100_000, 0.0)

                def block():
                    f = feed.factor()
                    feed.stage("upstream", ROWS, BLOCK_BUSY_S, reads=ROWS)
                    feed.stage("downstream", int(ROWS * f), BLOCK_BUSY_S)
            else:
                def report(stage: str, rows: int, reads: int) -> None:
                    send("reports", name, {"stages": {stage: (rows, BLOCK_BUSY_S)}, "reads": reads,
                                           "read_began": time.time() - BLOCK_BUSY_S, "bad": []})

                def block():
                    f = send("echo_factor").result()  # the call waited for its reply
                    report("upstream", ROWS, ROWS)
                    report("downstream", int(ROWS * f), 0)

            blocks = paced(until, rate, block)
            if mode == "batched":
                feed.close()
            return {"blocks": blocks, "calls": calls[0]}

    @ray.remote(num_cpus=CALLER_CPUS)
    class Worker:
        """A train worker's calls: a heartbeat and a live-factor request per step, each
        skipped while the previous reply is out."""

        def run(self, collector, rank: int, until: float, steps_per_s: float) -> dict:
            from echoray.records import Heartbeat

            state = {"steps": 0, "beat": None, "factor": None, "calls": 0}

            def out(ref) -> bool:
                return ref is not None and not ray.wait([ref], timeout=0)[0]

            def step():
                state["steps"] += 1
                if not out(state["beat"]):
                    s = state["steps"]
                    state["beat"] = collector.heartbeat.remote(Heartbeat(rank, s, s * 32, s * 0.01, s * 8))
                    state["calls"] += 1
                if not out(state["factor"]):
                    state["factor"] = collector.echo_factor.remote()
                    state["calls"] += 1

            paced(until, steps_per_s, step)
            return {"steps": state["steps"], "calls": state["calls"]}

    return Preprocessor, Worker


def cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def arm(pre, workers, mode: str, rate: float, a) -> dict:
    """One arm on a fresh collector: all callers for a.duration seconds."""
    import ray

    collector = collector_class().remote("auto", 8.0, n_train=100_000, start_factor=2.0)
    proc = psutil.Process(ray.get(collector.pid.remote()))
    ray.get(collector.attempt_started.remote(0, 0))
    cpu0, t0 = cpu_s(proc), time.time()
    until = t0 + a.duration
    refs = [p.run.remote(collector, f"actor{i}", mode, until, rate) for i, p in enumerate(pre)]
    refs += [w.run.remote(collector, r, until, a.steps_per_s) for r, w in enumerate(workers)]
    got = ray.get(refs)
    ray.get(collector.sync.remote())  # what was sent has landed
    wall, cpu = time.time() - t0, cpu_s(proc) - cpu0
    ray.kill(collector)
    pre_got, work_got = got[:len(pre)], got[len(pre):]
    calls = sum(g["calls"] for g in got)
    pre_calls = sum(g["calls"] for g in pre_got)
    per_call = cpu / calls if calls else None
    per_actor_s = pre_calls / len(pre) / wall
    return {
        "mode": mode, "block_rate_per_actor": rate, "wall_s": wall,
        "blocks_per_s": sum(g["blocks"] for g in pre_got) / wall,
        "steps_per_s": sum(g["steps"] for g in work_got) / wall,
        "collector_calls_per_s": calls / wall, "actor_calls_per_s": pre_calls / wall,
        "collector_cpu_s": cpu, "collector_cpu_share": cpu / wall, "collector_cpu_s_per_call": per_call,
        "projection_1000_actors": {
            "calls_per_s": 1000 * per_actor_s,
            "collector_cpu_share": 1000 * per_actor_s * per_call if per_call else None,
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actors", type=int, default=32)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--rates", type=float, nargs="+", default=[10.0, 40.0], help="blocks per second per actor")
    ap.add_argument("--steps-per-s", type=float, default=20.0, help="train steps per second per worker")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds per arm")
    ap.add_argument("--smoke", action="store_true", help="4 actors, 2 workers, 2 s arms (proves it runs)")
    ap.add_argument("--name", default="control_plane")
    a = ap.parse_args()
    if a.smoke:
        a.actors, a.workers, a.duration = 4, 2, 2.0
    import ray

    ray.init(num_cpus=max(1, round((a.actors + a.workers) * CALLER_CPUS + 0.5)), include_dashboard=False,
             logging_level="ERROR")
    Preprocessor, Worker = caller_classes()
    pre = [Preprocessor.remote() for _ in range(a.actors)]
    workers = [Worker.remote() for _ in range(a.workers)]
    ray.get([c.__ray_ready__.remote() for c in (*pre, *workers)])
    arms = []
    for rate in a.rates:
        for mode in ("per_call", "batched"):
            arms.append(arm(pre, workers, mode, rate, a))
            r = arms[-1]
            print(f"{mode:9s} {rate:5.1f} blocks/s/actor: {r['collector_calls_per_s']:8.1f} calls/s, "
                  f"collector {r['collector_cpu_share']:.3f} CPU, {1e6 * (r['collector_cpu_s_per_call'] or 0):.0f} us/call")
    ray.shutdown()
    print(f"saved {save(a.name, {'actors': a.actors, 'workers': a.workers, 'arms': arms}, a)}")


if __name__ == "__main__":
    main()
