"""Progress inside an epoch, from the workers' heartbeats (pure functions).

An ImageNet epoch takes many minutes; the epoch line alone leaves a user blind that
long. Every `train.log_every_s` the driver turns two heartbeat snapshots into one
line (step, examples/s, fresh and trained counts, echo factor, ETA of the epoch) and
the same figures to MLflow. Workers already send cumulative counters twice a second
(train/loop.py HEARTBEAT_S), so this costs the workers nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tick:
    """Cumulative counters over all workers at wall time `t` (from RunCollector.poll)."""

    t: float
    steps: int  # optimizer steps of one worker (the workers step in lockstep)
    trained: int  # samples trained, all workers (a sample's batch-augmentation views once: heartbeats send Counters.samples)
    fresh: int | None  # fresh examples, all workers; None while no worker reports them


@dataclass(frozen=True)
class EpochClock:
    """Where an epoch ends: every `steps_per_epoch` steps, or (echo.factor auto with
    example echoing) when the fresh examples pass another `n_train` (train/loop.py)."""

    steps_per_epoch: int
    n_train: int
    by_fresh: bool = False
    max_epochs: int | None = None  # the run's last epoch (train.max_epochs); None: no end known

    def epochs_done(self, tick: Tick) -> int:
        return (tick.fresh or 0) // self.n_train if self.by_fresh else tick.steps // self.steps_per_epoch

    def epoch_of(self, tick: Tick) -> int:
        """The epoch `tick` is in: a step (or fresh count) at an epoch's end starts the
        next, up to the run's last epoch, which the run's last step ends."""
        nxt = self.epochs_done(tick) + 1
        return nxt if self.max_epochs is None else min(nxt, self.max_epochs)

    def finished(self, tick: Tick) -> bool:
        """True once `tick` has passed the run's last epoch (then no epoch is left to time)."""
        return self.max_epochs is not None and self.epochs_done(tick) >= self.max_epochs


def progress_figures(prev: Tick, cur: Tick, clock: EpochClock, echo_factor: float) -> dict[str, float | int | None]:
    """The figures of one progress line; rates over the interval prev -> cur."""
    dt = cur.t - prev.t
    step_rate = (cur.steps - prev.steps) / dt if dt > 0 else 0.0
    examples_per_s = (cur.trained - prev.trained) / dt if dt > 0 else 0.0
    epoch = clock.epoch_of(cur)
    if clock.finished(cur):  # after the last step: evaluation, checkpoint, shut-down
        eta = 0.0
    elif clock.by_fresh:
        fresh_rate = (cur.fresh - prev.fresh) / dt if cur.fresh is not None and prev.fresh is not None and dt > 0 \
            else 0.0
        left = epoch * clock.n_train - cur.fresh if cur.fresh is not None else None
        eta = left / fresh_rate if left is not None and fresh_rate > 0 else None
    else:
        left_steps = clock.steps_per_epoch - cur.steps % clock.steps_per_epoch
        eta = left_steps / step_rate if step_rate > 0 else None
    return {"epoch": epoch, "step": cur.steps, "examples_per_s": examples_per_s, "fresh_examples": cur.fresh,
            "trained_examples": cur.trained, "echo_factor": echo_factor, "epoch_eta_s": eta}


def progress_line(fig: dict[str, float | int | None]) -> str:
    fresh = "-" if fig["fresh_examples"] is None else f"{fig['fresh_examples']:>8}"
    eta = "?" if fig["epoch_eta_s"] is None else f"{fig['epoch_eta_s']:.0f}s"
    return (f"  epoch {fig['epoch']:>3}  step {fig['step']:>6}  {fig['examples_per_s']:8.1f} ex/s  "
            f"fresh {fresh}  trained {fig['trained_examples']:>8}  echo {fig['echo_factor']:.2f}  "
            f"epoch ETA {eta}")


def progress_metrics(fig: dict[str, float | int | None]) -> dict[str, float | None]:
    """MLflow keys of their own (`live_*`, logged at the train step): the epoch metrics
    of the same names are logged per epoch, and one key must keep one step axis."""
    return {f"live_{k}": fig[k] for k in ("examples_per_s", "fresh_examples", "trained_examples",
                                          "echo_factor", "epoch_eta_s")}


class LiveProgress:
    """Fed every poll of the collector (runtime/monitor.py); emits figures once
    `every_s` have passed since the last line (0: never), and none after a line that
    showed the run's last epoch done: heartbeats go on while the run evaluates and
    stops, and their lines read "epoch N+1 ... 0.0 ex/s" before the clock knew its end."""

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
