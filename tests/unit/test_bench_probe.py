"""bench-input's figures: the rate after the first batch, images per CPU-second, the load warning."""

import os

import pytest

from echoray import bench_input, bench_probe
from echoray.bench_input import after_first_rate, examples_per_row_read, per_cpu_second, steady_rate
from echoray.config import PipelineConfig
from echoray.echo_plan import EchoPlan


def test_after_first_rate_excludes_the_first_batch():
    marks = [(10.0, 64), (11.0, 128), (12.0, 192), (14.0, 320)]
    assert after_first_rate(marks) == (320 - 64) / 4.0
    assert after_first_rate(marks[:1]) is None


def test_steady_rate_counts_the_second_half_from_the_batch_before_it():
    # evenly spaced: 8 examples a second; the window starts at the batch at the midpoint
    assert steady_rate([(t, 8 * (t + 1)) for t in range(9)]) == pytest.approx(8.0)
    # a burst of early batches and one late one (a tiny run): the late batch's rate, not None
    assert steady_rate([(0.0, 8), (0.01, 16), (0.02, 24), (1.0, 32)]) == pytest.approx(8 / 0.98)
    assert steady_rate([(0.0, 8), (1.0, 16)]) is None  # fewer than 3 batches
    assert steady_rate([(0.5, 8), (0.5, 16), (0.5, 24)]) is None  # no time between them


def test_per_cpu_second_counts_the_window_and_new_actors_from_their_start():
    marks = [(0.0, 64), (4.0, 576)]
    cpu = {"first": ({1: 2.0, 2: 3.0}, 10.0), "last": ({1: 4.0, 2: 5.0, 3: 0.5}, 10.5)}
    out = per_cpu_second(marks, cpu)
    assert out["actor_cpu_s"] == 4.5  # 2 + 2 + 0.5 (actor 3 started inside the window)
    assert out["images_per_actor_cpu_s"] == 512 / 4.5
    assert out["images_per_cpu_s"] == 512 / 5.0
    assert per_cpu_second(marks, {})["images_per_cpu_s"] is None


def test_an_actor_gone_before_the_last_batch_counts_to_its_last_sample(monkeypatch):
    """Ray Data stops the pool when the plan's last blocks are done, before the consumer
    takes the last batches: the actors' CPU is sampled every CPU_SAMPLE_S on the way."""
    clock = iter([0.0, 0.3, 0.6, 1.2, 1.5])  # one perf_counter reading per batch
    actor = iter([{7: 1.0}, {7: 2.0}, {7: 3.0}, {}])  # at batch 1, 0.6 s, 1.2 s, the end (gone)
    monkeypatch.setattr(bench_input.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(bench_probe, "actor_cpu_s", lambda: next(actor))
    monkeypatch.setattr(bench_probe, "driver_cpu_s", lambda: 0.0)
    batches = [{"sample_id": [0] * 64} for _ in range(5)]
    marks, _, cpu = bench_input._consume(batches, None, None)
    assert [m[1] for m in marks] == [64, 128, 192, 256, 320]
    assert cpu["first"][0] == {7: 1.0} and cpu["last"][0] == {7: 3.0}  # not {}: its last sample
    assert per_cpu_second(marks, cpu)["images_per_actor_cpu_s"] == 256 / 2.0
    assert bench_input.CPU_SAMPLE_S == 0.5


def test_busy_machine_warns_only_above_the_core_count():
    assert bench_probe.busy_machine(2.0, 2) is None
    msg = bench_probe.busy_machine(3.4, 2)
    assert msg.startswith("warning: the load average is 3.4 on 2 core(s)")


def test_cpu_s_reads_this_process_and_skips_missing_pids():
    t = bench_probe.cpu_s([os.getpid(), 2**22 + 12345])
    assert list(t) == [os.getpid()] and t[os.getpid()] > 0


def _plan(stage, factor, on="cpu"):
    return EchoPlan.from_config(PipelineConfig.model_validate({
        "echo": {"stage": stage, "factor": factor},
        "preprocess": {"augment": {"on": on, "ops": [{"op": "random_crop", "padding": 2}]}}}))


@pytest.mark.parametrize("stage, factor, on, expected", [
    ("none", 1.0, "cpu", 1.0),
    ("batch", 3.0, "cpu", 1.0),  # the worker repeats batches: the actors make fresh rows
    ("after_augment", 2.5, "cpu", 2.5),  # the actor echoes at a fixed factor
    ("before_augment", 2.0, "cpu", 2.0),
    ("before_augment", "auto", "cpu", 3.25),  # in the actor (per-copy CPU augmentation): its live factor
    ("after_augment", "auto", "cpu", 1.0),  # at consumption: the worker repeats, the actors do not
    ("before_augment", "auto", "worker", 1.0),
])
def test_produced_rate_counts_the_actors_echo_only(stage, factor, on, expected):
    """bench-input's produced rate is rows read x examples per row read: the live factor
    only where the actor echoes; consumption echo's actors emit fresh rows only (the rate
    was multiplied by the live factor for every example stage)."""
    asked = []

    def live():
        asked.append(1)
        return 3.25

    plan = _plan(stage, factor, on)
    assert examples_per_row_read(plan, live) == expected
    assert len(asked) == (1 if plan.in_actor and factor == "auto" else 0)


def test_per_cpu_second_counts_from_the_second_half_where_it_was_sampled(monkeypatch):
    """With --seconds the CPU window starts at the second half, like the rate: an actor's
    start-up before it is not counted, an actor gone before it adds nothing."""
    clock = iter([0.0, 0.6, 1.2, 2.0, 2.6])
    # samples: the first batch, 0.6 s, 1.2 s, the second half's start (1.2 s), 2.0 s, the end;
    # actor 8 ends before the second half
    actor = iter([{}, {7: 1.5, 8: 0.2}, {7: 2.0}, {7: 2.5}, {7: 3.0}, {7: 3.5}])
    monkeypatch.setattr(bench_input.time, "perf_counter", lambda: next(clock, 3.0))
    monkeypatch.setattr(bench_probe, "actor_cpu_s", lambda: next(actor))
    monkeypatch.setattr(bench_probe, "driver_cpu_s", iter([0.0, 1.0, 1.25]).__next__)
    monkeypatch.setattr(bench_input, "_rows_read", lambda collector: 0)
    batches = [{"sample_id": [0] * 64} for _ in range(5)]
    marks, _, cpu = bench_input._consume(batches, 2.0, None)
    assert cpu["mid"] == ({7: 2.5, 8: 0.2}, 1.0, 192)  # at the 3rd batch, 1.2 s after the first
    out = per_cpu_second(marks, cpu)
    assert out["actor_cpu_s"] == 1.0  # 3.5 - 2.5; actor 8's 0.2 stays out
    assert out["images_per_actor_cpu_s"] == 64 / 1.0 and out["images_per_cpu_s"] == 64 / 1.25
