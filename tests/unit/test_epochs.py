"""One meaning of epoch (echoray/epochs.py): passes over the training set's fresh examples,
fractional, and the fresh counts where evaluations and epochs end."""

import pytest

from echoray.epochs import epoch_end, epochs_of, evaluation_point


def test_epochs_are_fresh_examples_over_the_training_set():
    assert epochs_of(1438, 1438) == 1.0
    assert epochs_of(1904, 1438) == 1.3241  # after_augment e = 2 at its old epoch end: 1.32 passes, not 1
    assert epochs_of(8448, 1438) == 5.8748  # the default run's 132 steps of 64
    assert epochs_of(18432, 18446) == 0.9992  # a run that stops inside its only pass
    assert epochs_of(0, 7) == 0.0
    with pytest.raises(ValueError, match="n_train=0"):
        epochs_of(5, 0)


def test_evaluation_points_are_evenly_spaced_in_fresh_examples():
    assert [evaluation_point(i, 1438, 1) for i in (1, 2, 3)] == [1438, 2876, 4314]
    assert [evaluation_point(i, 1438, 4) for i in range(1, 9)] == [360, 719, 1079, 1438, 1798, 2157, 2517, 2876]
    assert [evaluation_point(i, 192, 3) for i in range(1, 4)] == [64, 128, 192]


def test_an_epoch_ends_at_the_next_multiple_of_the_training_set():
    assert [epoch_end(f, 100) for f in (0, 1, 99, 100, 250)] == [100, 100, 100, 200, 300]
    assert [epoch_end(f, 100, max_epochs=2) for f in (150, 199, 200)] == [200, 200, 200]  # the run's last
