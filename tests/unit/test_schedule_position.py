"""The learning-rate schedule's position in epochs of fresh data (train/schedule_position.py)."""

import math

import numpy as np
import pytest

from echoray.epochs import evaluation_point
from echoray.train.schedule_position import at_evaluation, rebase, schedule_epochs


def test_a_fixed_factor_counts_its_known_steps_per_epoch():
    assert schedule_epochs(10, [0, 0.0], 5) == 2.0
    assert schedule_epochs(25, [10, 2.0], 10) == 3.5
    assert schedule_epochs(25, [10, 2.0], 10, cap=3.0) == 3.0
    # a measured steps per epoch in the start replaces the configured one
    assert schedule_epochs(30, [10, 2.0, 40.0], 10) == 2.5


def auto_run(fresh_per_step, n_train, per_epoch, spe_at_1):
    """Positions at every step of a run whose steps add `fresh_per_step[i]` fresh examples,
    evaluating as train/loop.py does: the first step whose fresh count reaches the next point."""
    since, evals, fresh, out = [0, 0.0], 0, 0, []
    for step, f in enumerate(fresh_per_step, start=1):
        cap = evaluation_point(evals + 1, n_train, per_epoch) / n_train
        out.append((schedule_epochs(step - 1, since, spe_at_1, cap), fresh / n_train))  # the step's LR
        fresh += f
        if fresh >= evaluation_point(evals + 1, n_train, per_epoch):
            evals += 1
            since = at_evaluation(step, fresh, n_train, since)
            assert since[1] == fresh / n_train  # exact at each evaluation
    return np.array(out), since


@pytest.mark.parametrize("factor", [1, 2, 4, 8])
def test_under_auto_the_schedule_follows_fresh_data_whatever_the_factor(factor):
    n, batch, per_epoch, epochs = 1024, 32, 2, 8
    steps = epochs * factor * n // batch
    positions, _ = auto_run([batch // factor] * steps, n, per_epoch, n / batch)
    schedule, fresh = positions[:, 0], positions[:, 1]
    assert np.all(np.diff(schedule) >= 0)  # never goes back
    # within one evaluation interval of the data after the first, within one step's data
    later = fresh >= 1 / per_epoch
    assert np.max(np.abs(schedule[later] - fresh[later])) <= batch / factor / n + 1e-9
    # never past the next evaluation's point, and the last step is at the end of the budget
    assert schedule.max() <= epochs and schedule[-1] >= epochs - 1 / per_epoch
    # counted at e = 1 instead (the defect): the schedule ended within epochs / factor of data
    at_e1 = np.arange(steps) / (n / batch)
    assert factor == 1 or at_e1[int(steps / factor)] >= epochs - 1e-9


def test_a_changing_factor_is_exact_at_every_evaluation_and_never_ahead_of_the_next():
    rng = np.random.default_rng(0)
    n, batch, per_epoch = 600, 20, 3
    fresh_per_step = np.repeat(rng.integers(1, batch + 1, size=40), 25)  # factor moves every 25 steps
    positions, _ = auto_run(fresh_per_step.tolist(), n, per_epoch, n / batch)
    schedule, fresh = positions[:, 0], positions[:, 1]
    nxt = np.ceil(fresh * per_epoch + 1e-12) / per_epoch  # the next evaluation's point, in epochs
    assert np.all(np.diff(schedule) >= 0) and np.all(schedule <= nxt + 1e-9)


def test_an_interval_without_steps_or_fresh_data_keeps_the_last_measure():
    assert at_evaluation(10, 100, 100, [0, 0.0]) == [10, 1.0, 10.0]
    assert at_evaluation(10, 100, 100, [10, 1.0, 10.0]) == [10, 1.0, 10.0]
    assert at_evaluation(20, 100, 100, [10, 1.0, 10.0]) == [20, 1.0, 10.0]


def test_a_resume_with_another_worker_count_goes_on_from_where_the_schedule_is():
    # fixed factor: 2 workers at 5 steps an epoch, then 1 at 10 (recovery/reshard.py's resume)
    since = rebase(10, [0, 0.0], 5, 10)
    assert since == [10, 2.0] and schedule_epochs(25, since, 10) == 3.5
    # auto: the measured 20 steps an epoch at 2 workers is 40 at 1
    since = rebase(30, [10, 1.0, 20.0], 5, 10, cap=math.inf)
    assert since == [30, 2.0, 40.0] and schedule_epochs(70, since, 10) == 3.0
