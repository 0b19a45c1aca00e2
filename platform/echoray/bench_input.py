"""`echoray bench-input`: the training input pipeline alone, to size actor pools and find R.

It reads the stream every run's workers read (data/pipeline.py `build_train_dataset`:
read plan -> preprocessing actor pool: read, decode, echo, augment) and batches it as a
worker does (train/early_stream.py `batch_stream`: train.batch_size, the local shuffle
buffer, drop_last), with no model, no workers and no MLflow run. It runs for --seconds after the first
batch (or one epoch of the read plan) and reports the rate over the second half of that:
the lower of the rate batches arrived at and the rate the pool read rows at (or its
busy-time capacity when the plan ends first): a backlog made while the consumer started
would otherwise inflate the first. Stage busy time comes from the same collector a run uses.
It also reports the first batch's time (from the start of iteration: the Dataset is
built and the actor pool starts then), the rate over all the time after the first
batch, images per CPU-second of the actors and of this process over the second half
(bench_probe.py), and the load average at its start, with a warning when that is
above the core count.
"""

from __future__ import annotations

import os
import time
from typing import Any

import ray

from echoray import bench_probe
from echoray.config import PipelineConfig
from echoray.data.sources import SourceIndex, index_source
from echoray.data.sources.file_table import publish_index
from echoray.preflight import require_fits
from echoray.runtime.session import start_ray

PLAN_EXAMPLES = 200_000


def _started(cfg: PipelineConfig, seconds: float | None, idx: SourceIndex | None):
    """(config, published index) with Ray up and the actor pool known to fit. One epoch, or
    with --seconds enough epochs for PLAN_EXAMPLES (a 90-epoch ImageNet plan is 900 blocks
    to set up: docs/how-to/bench-input.md)."""
    idx = idx or index_source(cfg.source, cfg.train.store_retry_s())
    epochs = 1 if seconds is None else min(cfg.train.max_epochs, max(1, -(-PLAN_EXAMPLES // len(idx.train_ids))))
    cfg = cfg.model_copy(update={"train": cfg.train.model_copy(update={"max_epochs": epochs})})
    a = cfg.preprocess.actors
    if start_ray():
        demand = {"CPU": a.num_cpus * a.min_size, **{k: v * a.min_size for k, v in a.resources.items()}}
        require_fits(demand, "the actor pool", "; lower preprocess.actors.*")
    return cfg, publish_index(idx)


def bench_input(cfg: PipelineConfig, seconds: float | None, idx: SourceIndex | None = None) -> dict[str, Any]:
    """`idx`: an index built elsewhere (benchmarks: a 1.28 M-entry one), else cfg.source's."""
    load_start = os.getloadavg()[0]
    warning = bench_probe.busy_machine(load_start)
    if warning:
        print(f"[echoray] {warning}", flush=True)
    cfg, idx = _started(cfg, seconds, idx)
    a = cfg.preprocess.actors
    from echoray.data.pipeline import build_train_dataset
    from echoray.echo_plan import EchoPlan
    from echoray.runtime.collector import RunCollector
    from echoray.train.early_stream import StartedStream, batch_stream

    collector = RunCollector.remote(cfg.echo.factor, cfg.echo.max_factor, n_train=len(idx.train_ids),
                                    max_bad_fraction=cfg.source.max_bad_fraction)
    t0 = time.perf_counter()
    try:  # the collector goes however the stream ends (the caller's Ray may live on)
        ds = build_train_dataset(cfg, idx, collector)  # built in the timed span, as in a run's start
        ds.context.execution_options.preserve_order = True  # as train/trainer.py asks
        batches = StartedStream(batch_stream(ds, cfg, 0))
        try:
            marks, produced, cpu = _consume(batches, seconds, collector)
        finally:
            batches.close()
        end = time.perf_counter()
        stages = ray.get(collector.stage_totals.remote())
        per_row = examples_per_row_read(EchoPlan.from_config(cfg), lambda: ray.get(collector.echo_factor.remote()))
    finally:
        ray.kill(collector)
    delivered = steady_rate(marks)
    made = None
    if len(produced) == 2 and produced[1][0] > produced[0][0]:
        made = (produced[1][1] - produced[0][1]) / (produced[1][0] - produced[0][0]) * per_row
    elif stages.get("upstream", {}).get("busy_s"):  # the plan ended first: the pool's capacity instead
        up = stages["upstream"]
        made = up["rows"] / up["busy_s"] * up["actors"] * per_row
    return {
        # What the pool sustains: batches that arrive faster than the pool makes them drain
        # a backlog built while the consumer started (seen: 120/s delivered, 70/s made).
        "examples_per_s": min(delivered, made) if delivered and made else delivered,
        "delivered_examples_per_s": delivered,
        "produced_examples_per_s": made,
        "first_batch_s": (marks[0][0] - t0) if marks else None,
        "after_first_batch_examples_per_s": after_first_rate(marks),
        **per_cpu_second(marks, cpu),
        "load_avg_1m_start": load_start,
        "load_avg_1m_end": os.getloadavg()[0],
        "cores": bench_probe.usable_cores(),
        "load_warning": warning,
        "train_examples": len(idx.train_ids),
        "marks": [(t - t0, n) for t, n in marks],  # (seconds since iteration began, examples so far) per batch
        "actors": a.max_size,
        "cpus": a.num_cpus * a.max_size,
        "batches": len(marks),
        "batch_size": cfg.train.batch_size,
        "stages": stages,
        "wall_s": end - t0,
    }


def examples_per_row_read(plan, live_factor) -> float:
    """Examples the actors emit per row they read: the actor's echo factor where the actor
    echoes (EchoPlan.in_actor; `live_factor()` asks the collector for echo.factor: auto's
    current value), else 1.0: with no echo, batch echo, or echo at consumption the actors
    make fresh rows only (the worker would repeat them; bench-input has no worker)."""
    if not plan.in_actor:
        return 1.0
    return float(live_factor()) if plan.actor_factor == "auto" else float(plan.actor_factor)


# Actor CPU is sampled this often while batches arrive: Ray Data stops a pool's actors
# once the plan's last blocks are done, before the consumer takes the last batches, and a
# run to the plan's end (benchmarks/input_epochs.py) sampled none at its last batch.
CPU_SAMPLE_S = 0.5


def _consume(batches, seconds: float | None, collector) -> tuple[list, list, dict]:
    """Takes batches until `seconds` after the first one (or the plan's end): (marks:
    (arrival time, examples so far) per batch; produced: (time, rows the pool had read) at
    the second half's ends; cpu: actor and driver CPU samples at the first batch, at the
    second half's start (with `seconds`; "mid", with the examples so far) and at the last)."""
    marks: list[tuple[float, int]] = []
    produced: list[tuple[float, int]] = []
    cpu: dict[str, Any] = {}
    actors: dict[int, float] = {}  # each actor's CPU at its latest sample (CPU_SAMPLE_S apart)
    examples = 0
    for batch in batches:
        examples += len(batch["sample_id"])
        marks.append((time.perf_counter(), examples))
        if len(marks) == 1:
            cpu["first"] = (bench_probe.actor_cpu_s(), bench_probe.driver_cpu_s())
            sampled = marks[0][0]
        elif marks[-1][0] - sampled >= CPU_SAMPLE_S:
            actors.update(bench_probe.actor_cpu_s())
            sampled = marks[-1][0]
        if seconds is not None:
            if not produced and marks[-1][0] - marks[0][0] >= seconds / 2:
                produced.append((time.perf_counter(), _rows_read(collector)))
                actors.update(bench_probe.actor_cpu_s())  # an actor gone by now stays at its last sample
                cpu["mid"] = (dict(actors), bench_probe.driver_cpu_s(), examples)
            if marks[-1][0] - marks[0][0] >= seconds:
                produced.append((time.perf_counter(), _rows_read(collector)))
                break
    if marks:  # an actor gone by now (the plan ended, the pool shrank) counts to its last sample
        cpu["last"] = ({**actors, **bench_probe.actor_cpu_s()}, bench_probe.driver_cpu_s())
    return marks, produced, cpu


def after_first_rate(marks: list[tuple[float, int]]) -> float | None:
    """Examples/s from the first batch's arrival to the last's (the first batch excluded)."""
    if len(marks) < 2 or marks[-1][0] <= marks[0][0]:
        return None
    return (marks[-1][1] - marks[0][1]) / (marks[-1][0] - marks[0][0])


def per_cpu_second(marks: list[tuple[float, int]], cpu: dict[str, Any]) -> dict[str, float | None]:
    """Examples per CPU-second over the second half of the time after the first batch (as
    steady_rate; from the first batch where there is no "mid" sample, a run to the plan's
    end): of the actors alone and of actors + this process (batching, the shuffle buffer).
    None without CPU figures."""
    out: dict[str, float | None] = {"actor_cpu_s": None, "images_per_actor_cpu_s": None,
                                    "images_per_cpu_s": None}
    if "first" not in cpu or "last" not in cpu or len(marks) < 2:
        return out
    actors0, driver0, n0 = cpu.get("mid") or (*cpu["first"], marks[0][1])
    actor = bench_probe.cpu_between(actors0, cpu["last"][0])
    driver = cpu["last"][1] - driver0
    n = marks[-1][1] - n0
    out["actor_cpu_s"] = actor
    if actor > 0:
        out["images_per_actor_cpu_s"] = n / actor
        out["images_per_cpu_s"] = n / (actor + driver)
    return out


def _rows_read(collector) -> int:
    return int(ray.get(collector.stage_totals.remote()).get("upstream", {}).get("rows", 0))


def steady_rate(marks: list[tuple[float, int]]) -> float | None:
    """Examples/s over the second half of the time after the first batch, from the last batch
    at or before that half's start to the last batch: the first half drains what the pool made
    while the consumer started, which would inflate the rate. Defined for any 3 or more
    batches over some time (a burst of early batches and one late one included); else None."""
    if len(marks) < 3 or marks[-1][0] <= marks[0][0]:
        return None
    mid_t = marks[0][0] + (marks[-1][0] - marks[0][0]) / 2
    t_mid, n_mid = [m for m in marks if m[0] <= mid_t][-1]
    t_end, n_end = marks[-1]
    return (n_end - n_mid) / (t_end - t_mid)


def print_bench(r: dict[str, Any]) -> None:
    import json

    def fmt(v, spec):
        return "n/a" if v is None else format(v, spec)

    print(f"[echoray] input pipeline: {fmt(r['examples_per_s'], '.1f')} examples/s (second half after the first "
          f"batch: {fmt(r['delivered_examples_per_s'], '.1f')} delivered, {fmt(r['produced_examples_per_s'], '.1f')} "
          "made by the pool) "
          f"({r['batches']} batches of {r['batch_size']}, {r['wall_s']:.1f} s), first batch at "
          f"{fmt(r['first_batch_s'], '.2f')} s, {r['actors']} actor(s), {r['cpus']:g} CPU(s)")
    print(f"[echoray]   after the first batch: {fmt(r['after_first_batch_examples_per_s'], '.1f')} examples/s; "
          f"{fmt(r['images_per_actor_cpu_s'], '.1f')} images per actor CPU-second, "
          f"{fmt(r['images_per_cpu_s'], '.1f')} per CPU-second with this process; load average "
          f"{r['load_avg_1m_start']:.2f} at the start, {r['load_avg_1m_end']:.2f} at the end, {r['cores']} core(s)")
    for name, s in r["stages"].items():
        per = s["rows"] / s["busy_s"] if s["busy_s"] else 0.0
        print(f"[echoray]   stage {name}: {s['rows']} rows, {s['busy_s']:.2f} s busy over {s['actors']} actor(s) "
              f"({per:.1f} rows per busy second per actor)")
    keys = ("examples_per_s", "first_batch_s", "after_first_batch_examples_per_s", "images_per_actor_cpu_s",
            "images_per_cpu_s", "load_avg_1m_start", "actors", "cpus")
    print(json.dumps({k: r[k] for k in keys}), flush=True)
