"""The epochs benchmark's arithmetic (benchmarks/input_epochs.py): the arms' order per
repeat and the figures read from a run's batch marks. The runs themselves are what
`benchmarks/input_pipeline.py --parts epochs` records."""

from __future__ import annotations

import itertools

import pytest

from helpers import load_benchmark

epochs = load_benchmark("input_epochs")

ARMS = ["dataloader", "echoray", "echoray_b"]


def test_over_as_many_repeats_as_arms_each_arm_holds_each_place_once():
    orders = [epochs.arm_order(ARMS, rep) for rep in range(len(ARMS))]
    assert all(sorted(o) == sorted(ARMS) for o in orders)  # every arm runs in every repeat
    for place in range(len(ARMS)):
        assert sorted(o[place] for o in orders) == sorted(ARMS)
    assert orders[0] == ARMS and orders[1] == ["echoray", "echoray_b", "dataloader"]


def test_two_arms_alternate_as_before():
    assert [epochs.arm_order(["dataloader", "echoray"], rep) for rep in range(4)] == [
        ["dataloader", "echoray"], ["echoray", "dataloader"]] * 2


def test_over_a_full_rotation_the_arms_keep_their_cyclic_neighbours():
    follows = {pair: 0 for pair in itertools.permutations(ARMS, 2)}
    for rep in range(len(ARMS)):
        o = epochs.arm_order(ARMS, rep)
        for a, b in itertools.pairwise(o):
            follows[(a, b)] += 1
    # a rotation of a, b, c gives a-b, b-c and c-a twice each, and no reversed pair: an arm
    # always runs after the same one, whose processes have wound down (settled_load) first
    assert follows[("dataloader", "echoray")] == follows[("echoray", "echoray_b")] == 2
    assert follows[("echoray_b", "dataloader")] == 2
    assert sum(follows.values()) == 6


def test_the_first_epoch_ends_at_the_batch_that_reaches_the_training_set():
    marks = [(0.5, 64), (1.0, 128), (1.5, 192), (2.0, 256), (2.5, 320), (3.5, 448)]
    f = epochs.epoch_figures(marks, n_train=192)
    assert f["first_batch_s"] == 0.5 and f["first_epoch_s"] == 1.5
    assert f["steady_examples_per_s"] == pytest.approx((448 - 192) / (3.5 - 1.5))
    assert f["epochs_seen"] == pytest.approx(448 / 192)


def test_a_run_that_never_finishes_an_epoch_has_no_epoch_and_no_steady_rate():
    f = epochs.epoch_figures([(0.4, 64), (0.9, 128)], n_train=1_000)
    assert f["first_epoch_s"] is None and f["steady_examples_per_s"] is None
