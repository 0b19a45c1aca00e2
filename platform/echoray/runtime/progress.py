"""Progress between evaluations, from the workers' heartbeats (pure functions).

An ImageNet epoch takes many minutes; the evaluation lines alone leave a user blind that
long. Every `train.log_every_s` the driver turns two heartbeat snapshots into one
line (fractional epoch, step, examples/s, fresh and trained counts, echo factor, ETA of
the epoch's end) and the same figures to MLflow. An epoch is a pass of fresh data
(echoray/epochs.py), so the line's epoch is the heartbeats' fresh count over the
training set, the figure the evaluation lines show. Workers already send cumulative
counters twice a second (train/loop_report.py HEARTBEAT_S), so this costs the workers nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from echoray.epochs import epoch_end, epochs_of


@dataclass(frozen=True)
class Tick:
    """Cumulative counters over all workers at wall time `t` (from RunCollector.poll)."""

    t: float
    steps: int  # optimizer steps of one worker (the workers step in lockstep)
    trained: int  # samples trained, all workers (a sample's batch-augmentation views once: heartbeats send Counters.samples)
    fresh: int | None  # fresh examples, all workers; None while no worker reports them


@dataclass(frozen=True)
class EpochClock:
    """Where a run is in epochs: passes over its `n_train` fresh examples (echoray/epochs.py),
    whatever the echo factor. `max_epochs` (train.max_epochs; None: no end known) ends the
    run, less the stream's last partial batch: fewer than `last_batch` fresh examples
    (readers x train.batch_size) that no step trains."""

    n_train: int
    max_epochs: int | None = None
    last_batch: int = 1

    def epoch_of(self, tick: Tick) -> float | None:
        """The fractional epoch of `tick`; None while no worker has reported fresh examples."""
        return None if tick.fresh is None else epochs_of(tick.fresh, self.n_train)

    def finished(self, tick: Tick) -> bool:
        """True once `tick` has trained what the run's last epoch can train (then no epoch
        is left to time)."""
        return (self.max_epochs is not None and tick.fresh is not None
                and tick.fresh > self.max_epochs * self.n_train - self.last_batch)


def progress_figures(prev: Tick, cur: Tick, clock: EpochClock, echo_factor: float) -> dict[str, float | int | None]:
    """The figures of one progress line; rates over the interval prev -> cur; the ETA is
    that of the current epoch's end (in fresh examples, at the interval's fresh rate)."""
    dt = cur.t - prev.t
    examples_per_s = (cur.trained - prev.trained) / dt if dt > 0 else 0.0
    if clock.finished(cur):  # after the last step: evaluation, checkpoint, shut-down
        eta = 0.0
    elif cur.fresh is None or prev.fresh is None or dt <= 0 or cur.fresh <= prev.fresh:
        eta = None
    else:
        left = epoch_end(cur.fresh, clock.n_train, clock.max_epochs) - cur.fresh
        eta = left / ((cur.fresh - prev.fresh) / dt)
    return {"epoch": clock.epoch_of(cur), "step": cur.steps, "examples_per_s": examples_per_s,
            "fresh_examples": cur.fresh, "trained_examples": cur.trained, "echo_factor": echo_factor,
            "epoch_eta_s": eta}


def progress_line(fig: dict[str, float | int | None]) -> str:
    epoch = "   -" if fig["epoch"] is None else f"{fig['epoch']:.2f}"
    fresh = "-" if fig["fresh_examples"] is None else f"{fig['fresh_examples']:>8}"
    eta = "?" if fig["epoch_eta_s"] is None else f"{fig['epoch_eta_s']:.0f}s"
    return (f"  epoch {epoch:>6}  step {fig['step']:>6}  {fig['examples_per_s']:8.1f} ex/s  "
            f"fresh {fresh}  trained {fig['trained_examples']:>8}  echo {fig['echo_factor']:.2f}  "
            f"epoch ETA {eta}")


def progress_metrics(fig: dict[str, float | int | None]) -> dict[str, float | None]:
    """MLflow keys of their own (`live_*`, logged at the optimizer step like every metric
    of a run): heartbeat counts, not the exact ones an evaluation logs under the plain
    names."""
    return {f"live_{k}": fig[k] for k in ("examples_per_s", "fresh_examples", "trained_examples",
                                          "echo_factor", "epoch_eta_s")}


class LiveProgress:
    """Fed every poll of the collector (driver/monitor.py); emits figures once
    `every_s` have passed since the last line (0: never), and none after a line that
    showed the run's last epoch done: heartbeats go on while the run evaluates and
    stops, and their lines would read "... 0.0 ex/s ... epoch ETA ?"."""

    def __init__(self, clock: EpochClock, every_s: float, emit):
        self.clock, self.every_s, self.emit = clock, every_s, emit
        self.prev: Tick | None = None

    def __call__(self, tick: dict | None, echo_factor: float) -> None:
        if tick is None or not self.every_s:
            return
        cur = Tick(**tick)
        if self.prev is None or cur.steps < self.prev.steps:  # first heartbeat, or a restarted worker group
            self.prev = cur
        elif cur.t - self.prev.t >= self.every_s and not self.clock.finished(self.prev):
            self.emit(progress_figures(self.prev, cur, self.clock, echo_factor))
            self.prev = cur
