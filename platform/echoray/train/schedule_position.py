"""Where the learning-rate schedule is, in epochs of fresh data, at an optimizer step.

The schedule (train/optim.py lr_multiplier) is a function of epochs of fresh data. The
loop counts them in optimizer steps from a start `since` = [step, position] (LoopState.lr_from),
at `steps_per_epoch` steps an epoch:
- a fixed echo factor e knows its steps per epoch ahead (echo_plan.py steps_per_shard_epoch);
- under `echo.factor: auto` they follow the measured factor, known only as the run goes. The
  start moves to every evaluation, where the global fresh count is summed anyway
  (`at_evaluation`): [step, fresh / n_train, the steps per epoch of the interval just ended],
  and the position never passes the next evaluation's point (the fresh count it falls at),
  which a run cannot have reached before that evaluation. So the schedule is exact at each
  evaluation, within one interval's change of factor between them, and the same on every
  rank (each input is a global sum or an evaluation index).
- A resume with another number of workers (recovery/reshard.py) starts anew from where the
  schedule is (`rebase`), the measured steps per epoch scaled to the new count.
Pure: no torch, no Ray.
"""

from __future__ import annotations

import math


def schedule_epochs(steps: int, since: list, steps_per_epoch: float, cap: float = math.inf) -> float:
    """The schedule's position at optimizer step `steps`: since[1] + (steps - since[0]) /
    steps per epoch, at most `cap`. The steps per epoch are since[2] where the start has one
    (measured under `auto`), else `steps_per_epoch`."""
    step0, epochs0, *measured = since
    per_epoch = measured[0] if measured else steps_per_epoch
    return min(float(epochs0) + (steps - int(step0)) / per_epoch, cap)


def at_evaluation(steps: int, fresh: int, n_train: int, since: list) -> list:
    """The start under `auto` after an evaluation at step `steps` with `fresh` fresh examples
    over all ranks: [steps, fresh / n_train, steps per fresh epoch since the last start]; the
    last start's steps per epoch are kept where the interval took no step or no fresh data."""
    position = fresh / n_train
    step0, epochs0, *measured = since
    if steps > step0 and position > epochs0:
        measured = [(steps - int(step0)) / (position - float(epochs0))]
    return [steps, position, *measured]


def rebase(steps: int, since: list, steps_per_epoch_before: float, steps_per_epoch_now: float,
           cap: float = math.inf) -> list:
    """The start for a resume with another worker count at step `steps`: where the schedule is
    (at the old count's steps per epoch) and, under `auto`, the measured steps per epoch
    scaled by now / before (fewer readers take more steps through an epoch)."""
    position = schedule_epochs(steps, since, steps_per_epoch_before, cap)
    measured = since[2:]
    scaled = [measured[0] * steps_per_epoch_now / steps_per_epoch_before] if measured else []
    return [steps, position, *scaled]
