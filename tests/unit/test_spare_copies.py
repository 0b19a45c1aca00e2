"""Extra copies for a worker that would wait (train/consumption_echo.py SpareCopies): copies of distinct
recently trained samples, never past max_copies per sample, never counted fresh."""

import numpy as np

from echoray.accounting.fresh import FreshTracker
from echoray.data.batching import sample_keys
from echoray.train.consumption_echo import SpareCopies


def trained(ids, copies, epoch=0):
    ids = np.asarray(ids, np.int64)
    return {"epoch": np.full(len(ids), epoch, np.int64), "sample_id": ids, "tokens": ids[:, None] * np.ones(3, np.int32),
            "echo_copy": np.zeros(len(ids), np.int64), "echo_copies": np.full(len(ids), copies, np.int64)}


def test_extras_are_distinct_samples_within_their_copy_budget_with_unique_copy_indices():
    spare, rng = SpareCopies(capacity=8, max_copies=4), np.random.default_rng(0)
    spare.keep(trained(range(8), copies=2))  # planned 2 copies each: 2 extra each at most
    made = []
    while (extra := spare.extras(4, np.zeros(0, np.int64), rng)) is not None:
        assert len(np.unique(extra["sample_id"])) == 4
        assert (extra["echo_copies"] == 0).all()
        assert (extra["tokens"][:, 0] == extra["sample_id"]).all()  # the sample's own row
        made.append(extra)
    rows = {k: np.concatenate([m[k] for m in made]) for k in made[0]}
    assert len(rows["sample_id"]) == 16  # 8 samples x (4 - 2) copies: exactly the budget
    ids, n = np.unique(rows["sample_id"], return_counts=True)
    assert list(ids) == list(range(8)) and (n == 2).all()
    pairs = set(zip(rows["sample_id"].tolist(), rows["echo_copy"].tolist(), strict=True))
    assert pairs == {(s, c) for s in range(8) for c in (2, 3)}  # after the planned copies 0 and 1


def test_excluded_samples_are_not_copied_and_too_few_open_samples_give_none():
    spare, rng = SpareCopies(capacity=8, max_copies=3), np.random.default_rng(1)
    spare.keep(trained(range(6), copies=1))
    held = sample_keys(np.zeros(3, np.int64), np.arange(3))
    extra = spare.extras(3, held, rng)
    assert sorted(extra["sample_id"].tolist()) == [3, 4, 5]
    assert spare.extras(4, held, rng) is None  # samples 3-5 are the only ones not held
    assert spare.extras(0, held, rng) is None


def test_only_the_latest_capacity_samples_are_kept_and_extra_rows_are_not_kept_twice():
    spare, rng = SpareCopies(capacity=5, max_copies=2), np.random.default_rng(2)
    spare.keep(trained(range(4), copies=1))
    spare.keep(trained(range(4, 8), copies=1))
    assert len(spare) == 5 and sorted(spare.rows["sample_id"].tolist()) == [3, 4, 5, 6, 7]
    extra = spare.extras(5, np.zeros(0, np.int64), rng)
    spare.keep(extra)  # trained extra rows: their samples are remembered already
    assert len(spare) == 5 and spare.extras(1, np.zeros(0, np.int64), rng) is None  # all at 2 copies
    spare.keep(trained([5], copies=1, epoch=1))  # epoch 1's sample 5 is another sample
    assert spare.extras(1, np.zeros(0, np.int64), rng)["epoch"].tolist() == [1]


def test_extra_copies_are_never_fresh():
    tracker = FreshTracker()
    first = trained(range(4), copies=2)
    assert tracker.observe(first["epoch"], first["sample_id"], first["echo_copies"]) == 4
    extra = trained(range(4), copies=0)  # extra copies, before and after the planned second copy
    assert tracker.observe(extra["epoch"], extra["sample_id"], extra["echo_copies"]) == 0
    assert tracker.observe(first["epoch"], first["sample_id"], first["echo_copies"]) == 0
    assert len(tracker) == 0  # the planned copies closed every entry; the extras opened none
    assert tracker.observe(extra["epoch"], extra["sample_id"], extra["echo_copies"]) == 0
    assert len(tracker) == 0
