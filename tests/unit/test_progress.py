"""Progress lines inside an epoch: figures from two heartbeat snapshots, and their cadence."""

import pytest

from echoray.runtime.progress import (
    EpochClock,
    LiveProgress,
    Tick,
    progress_figures,
    progress_line,
    progress_metrics,
)


def test_figures_rates_and_the_epoch_of_fresh_examples():
    clock = EpochClock(n_train=3200)
    prev = Tick(t=10.0, steps=130, trained=8320, fresh=4160)
    cur = Tick(t=20.0, steps=150, trained=9600, fresh=4800)  # 128 ex/s, 64 fresh/s
    fig = progress_figures(prev, cur, clock, echo_factor=2.0)
    assert fig == {"epoch": 1.5, "step": 150, "examples_per_s": 128.0, "fresh_examples": 4800,
                   "trained_examples": 9600, "echo_factor": 2.0, "epoch_eta_s": 25.0}  # 1600 fresh left
    assert progress_line(fig) == ("  epoch   1.50  step    150     128.0 ex/s  fresh     4800  trained     9600  "
                                  "echo 2.00  epoch ETA 25s")
    assert progress_metrics(fig) == {"live_examples_per_s": 128.0, "live_fresh_examples": 4800,
                                     "live_trained_examples": 9600, "live_echo_factor": 2.0,
                                     "live_epoch_eta_s": 25.0}


def test_an_epoch_is_a_pass_of_fresh_examples_at_any_factor():
    clock = EpochClock(n_train=1000)
    fig = progress_figures(Tick(0.0, 10, 1000, 1500), Tick(4.0, 30, 3000, 1700), clock, 3.1)
    assert fig["epoch"] == 1.7 and fig["epoch_eta_s"] == pytest.approx(300 / 50)  # 300 fresh left at 50/s
    at_end = progress_figures(Tick(0.0, 40, 0, 1900), Tick(5.0, 50, 640, 2000), clock, 1.0)
    assert (at_end["epoch"], at_end["epoch_eta_s"]) == (2.0, 50.0)  # a pass's end starts the next: 1000 at 20/s


def test_unknown_fresh_and_stopped_steps_say_so():
    clock = EpochClock(n_train=640)
    fig = progress_figures(Tick(0.0, 3, 192, None), Tick(10.0, 3, 192, None), clock, 1.0)
    assert fig["fresh_examples"] is None and fig["epoch"] is None and fig["epoch_eta_s"] is None
    assert fig["examples_per_s"] == 0.0
    line = progress_line(fig)
    assert line.startswith("  epoch      -  step") and "fresh -" in line and line.endswith("epoch ETA ?")
    stalled = progress_figures(Tick(0.0, 3, 192, 192), Tick(10.0, 3, 192, 192), clock, 2.0)
    assert stalled["epoch"] == 0.3 and stalled["epoch_eta_s"] is None


def test_live_progress_emits_at_its_cadence_only():
    lines = []
    live = LiveProgress(EpochClock(6400), every_s=10.0, emit=lines.append)
    live(None, 1.0)  # no heartbeat yet
    for t in range(0, 31):  # one poll a second, one step a second
        live({"t": float(t), "steps": t, "trained": 64 * t, "fresh": 64 * t}, 1.0)
    assert [f["step"] for f in lines] == [10, 20, 30]
    assert all(f["examples_per_s"] == 64.0 for f in lines)
    live({"t": 31.0, "steps": 2, "trained": 128, "fresh": 128}, 1.0)  # a worker group restarted
    live({"t": 35.0, "steps": 6, "trained": 384, "fresh": 384}, 1.0)
    assert len(lines) == 3  # the new baseline waits its own interval
    off = LiveProgress(EpochClock(6400), every_s=0, emit=lines.append)
    off({"t": 0.0, "steps": 0, "trained": 0, "fresh": 0}, 1.0)
    off({"t": 99.0, "steps": 99, "trained": 0, "fresh": 0}, 1.0)
    assert len(lines) == 3


def test_lines_after_the_last_step_stay_in_the_last_epoch_then_stop():
    """A 2-epoch run of 640 examples, 10 steps of 64 an epoch: heartbeats go on after step 20
    (evaluation, shut-down); the line that first sees step 20 says epoch 2 with nothing
    left, and no line follows it (before, they read "epoch 3 ... 0.0 ex/s")."""
    clock = EpochClock(n_train=640, max_epochs=2, last_batch=64)
    assert [clock.epoch_of(Tick(0.0, s, 0, 64 * s)) for s in (0, 9, 10, 19, 20)] == [0.0, 0.9, 1.0, 1.9, 2.0]
    assert [clock.finished(Tick(0.0, s, 0, 64 * s)) for s in (19, 20)] == [False, True]
    lines = []
    live = LiveProgress(clock, every_s=2.0, emit=lines.append)
    for t in range(0, 41):  # one step a second to step 20, then none
        s = min(t, 20)
        live({"t": float(t), "steps": s, "trained": 64 * s, "fresh": 64 * s}, 1.0)
    assert [(f["epoch"], f["step"], f["epoch_eta_s"]) for f in lines[-2:]] == [(1.8, 18, 2.0), (2.0, 20, 0.0)]
    assert len(lines) == 10  # one every 2 s to t = 20, none during the 20 s after


def test_a_run_is_finished_once_less_than_its_last_batch_is_left():
    """The stream's last, partial batch (fewer than readers x batch rows) is not trained:
    2 epochs of 1000 with batches of 2 x 32 end at 1984 fresh examples, finished."""
    clock = EpochClock(n_train=1000, max_epochs=2, last_batch=64)
    assert [clock.finished(Tick(0.0, 0, 0, f)) for f in (1936, 1937, 1984, None)] == [False, True, True, False]
    fig = progress_figures(Tick(0.0, 28, 2900, 1920), Tick(1.0, 31, 3100, 1984), clock, 3.0)
    assert (fig["epoch"], fig["epoch_eta_s"]) == (1.984, 0.0)
