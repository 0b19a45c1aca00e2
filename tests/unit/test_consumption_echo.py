"""Auto echo at consumption time (train/consumption_echo.py): the factor of the moment a
row is taken is the factor it is trained with, counts stay exact, ranks stay in step."""

import threading

import numpy as np

from echoray.accounting.fresh import FreshTracker, sample_keys
from echoray.data.echo import copy_counts, echo_keys
from echoray.train.consumption_echo import ConsumptionEcho, SpareCopies, agree_min

B = 32


def fresh_stream(n_batches, start=0, epoch=0):
    for i in range(start, start + n_batches):
        ids = np.arange(i * B, (i + 1) * B, dtype=np.int64)
        yield {"epoch": np.full(B, epoch, np.int64), "sample_id": ids, "label": ids % 10,
               "image": np.zeros((B, 4, 4, 1), np.uint8), "echo_copy": np.zeros(B, np.int64),
               "echo_copies": np.ones(B, np.int64)}


def test_a_factor_change_applies_to_the_next_rows_taken_and_counts_stay_exact():
    factor = [1.0]
    taken = []
    stage = ConsumptionEcho(7, B, 128, lambda: factor[0], rng_seed=1, on_take=lambda b: taken.append(b["sample_id"]))
    tracker, trained, fresh = FreshTracker(), [], 0
    for i, batch in enumerate(stage.batches(fresh_stream(40))):
        if i == 10:
            factor[0] = 3.5  # the collector moved e: no row taken before this is echoed at 3.5
        assert len(np.unique(sample_keys(batch["epoch"], batch["sample_id"]))) == B  # copies kept apart
        fresh += tracker.observe(batch["epoch"], batch["sample_id"], batch["echo_copies"])
        trained.append(batch)
    rows = {k: np.concatenate([b[k] for b in trained]) for k in trained[0]}
    # Rows taken after the change carry the new draw, those before the old one: e = 1.
    ids = np.concatenate(taken)
    at = np.array(stage.factors)  # the factor each fresh batch was echoed at, in order taken
    assert len(at) == len(taken)
    assert at[0] == 1.0 and at[-1] == 3.5 and (np.diff(at) >= 0).all()
    late = ids[np.repeat(at == 3.5, B)]
    want = copy_counts(echo_keys(7, np.zeros(len(late), np.int64), late), 3.5)
    got = {int(s): int(c) for s, c in zip(rows["sample_id"], rows["echo_copies"], strict=True)}
    assert all(got[int(s)] == w for s, w in zip(late, want, strict=True) if int(s) in got)
    # Fresh = distinct samples trained; a sample's trained copies never exceed its count.
    assert fresh == len(np.unique(rows["sample_id"]))
    _, per_sample = np.unique(rows["sample_id"], return_counts=True)
    assert (per_sample <= np.array([got[int(s)] for s in np.unique(rows["sample_id"])])).all()
    # The stream's tail: fewer than one batch of echoed rows is left untrained.
    assert stage.pending() is None or len(stage.pending()["sample_id"]) < B
    mean_e = len(rows["sample_id"]) / fresh
    assert 2.5 < mean_e < 3.5  # 10 of the ~40 fresh batches were taken at e = 1


def test_ranks_with_different_echo_draws_take_the_same_number_of_steps():
    world = 2
    barrier, slots = threading.Barrier(world), [None] * world
    steps = [0] * world

    def gather(r):
        def g(obj):
            slots[r] = obj
            barrier.wait()
            out = list(slots)
            barrier.wait()
            return out
        return g

    def rank(r):
        # Rank 1 echoes twice as often as rank 0: alone it would make about twice the batches.
        stage = ConsumptionEcho(3, B, 96, lambda: 1.5 * (r + 1), rng_seed=r, agree=agree_min(gather(r)))
        for _ in stage.batches(fresh_stream(12, start=100 * r)):
            steps[r] += 1

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert steps[0] == steps[1] >= 12 * 1.5 - 2  # rank 0's rows bound both: about 18 batches
    assert not any(t.is_alive() for t in threads)


class Bursty:
    """A source with poll() (train/early_stream.py StartedStream's contract) that delivers
    `burst` batches, then answers "not here" to `gap` polls; a next() taken while not
    ready is a wait (it ends the gap, as a new burst would)."""

    def __init__(self, batches, burst, gap):
        self.batches, self.burst, self.gap = batches, burst, gap
        self.left, self.gap_left, self.waits = burst, 0, 0

    def poll(self):
        if self.left > 0:
            return True
        if self.gap_left > 0:
            self.gap_left -= 1
            return self.gap_left == 0
        return True

    def __iter__(self):
        for batch in self.batches:
            if self.left == 0 and self.gap_left > 0:
                self.waits += 1
            self.left = self.left - 1 if self.left > 0 else self.burst - 1
            if self.left == 0:
                self.gap_left = self.gap
            yield batch


def run_stage(source, spare, factor=2.0, capacity=64):
    stage = ConsumptionEcho(5, B, capacity, lambda: factor, rng_seed=3, spare=spare)
    tracker, trained = FreshTracker(), []
    fresh = sum(tracker.observe(b["epoch"], b["sample_id"], b["echo_copies"]) or 0
                for b in stage.batches(source) if trained.append(b) is None)
    return stage, fresh, {k: np.concatenate([b[k] for b in trained]) for k in trained[0]}


def test_fill_waits_trains_extra_copies_through_a_gap_within_the_copy_budget():
    source = Bursty(list(fresh_stream(24)), burst=3, gap=4)
    stage, fresh, rows = run_stage(source, SpareCopies(64, max_copies=4))
    # Every fresh sample is trained, counted once; extras fill the gaps instead of waiting.
    assert fresh == 24 * B == len(np.unique(rows["sample_id"]))
    assert stage.extra_batches > 0 and source.waits == 0
    extra = rows["echo_copies"] == 0
    assert extra.sum() > 0 and len(rows["sample_id"]) == 24 * B * 2 + extra.sum()  # e = 2 planned, plus the extras
    _, per_sample = np.unique(rows["sample_id"], return_counts=True)
    assert per_sample.max() <= 4  # echo.max_factor
    audit = set(zip(rows["sample_id"].tolist(), rows["echo_copy"].tolist(), strict=True))
    assert len(audit) == len(rows["sample_id"])  # each trained row its own (sample, copy)
    for i in range(0, len(rows["sample_id"]), B):  # copies kept apart in every batch
        assert len(np.unique(rows["sample_id"][i:i + B])) == B


def test_a_gap_longer_than_the_spare_copies_last_is_waited_for():
    source = Bursty(list(fresh_stream(24)), burst=3, gap=40)
    stage, fresh, rows = run_stage(source, SpareCopies(64, max_copies=4))
    assert fresh == 24 * B and source.waits == 7  # every gap outlasts 64 samples' 2 spare copies
    _, per_sample = np.unique(rows["sample_id"], return_counts=True)
    assert per_sample.max() == 4  # the budget was spent before each wait


def test_without_spare_copies_the_same_source_is_waited_for_and_nothing_extra_is_trained():
    source = Bursty(list(fresh_stream(24)), burst=3, gap=4)
    stage, fresh, rows = run_stage(source, None)
    assert fresh == 24 * B and stage.extra_batches == 0 and (rows["echo_copies"] > 0).all()
    assert source.waits == 7  # one per gap: after bursts 1-7 of 8
    assert len(rows["sample_id"]) == 24 * B * 2


class DroppedAtOnce(ConsumptionEcho):
    """The reference: `take` as it was before the pool's `live` mask, cutting every batch
    taken out of the pool at once (a copy of the pool per batch)."""

    def take(self):
        held = {k: v[self.live] for k, v in self.pool.items()}
        n = len(held["sample_id"])
        perm = self.rng.permutation(n)
        keys = sample_keys(held["epoch"][perm], held["sample_id"][perm])
        _, first = np.unique(keys, return_index=True)
        order = np.sort(first)
        if len(order) < self.batch_size:
            order = np.concatenate([order, np.setdiff1d(np.arange(n), order)])
        chosen = perm[order[: self.batch_size]]
        keep = np.ones(n, dtype=bool)
        keep[chosen] = False
        self.pool, self.live = {k: v[keep] for k, v in held.items()}, np.ones(int(keep.sum()), dtype=bool)
        return {k: v[chosen] for k, v in held.items()}


def test_taken_rows_dropped_later_give_exactly_the_batches_dropped_at_once():
    """Invariance: the lazy drop changes the copying, not one row of what is trained."""
    runs = []
    for cls in (ConsumptionEcho, DroppedAtOnce):
        factors = iter(np.tile([1.0, 2.0, 1.5, 3.0, 1.25], 20))
        stage = cls(7, B, 96, lambda factors=factors: next(factors), rng_seed=3)
        runs.append(([b for b in stage.batches(fresh_stream(60))], stage.pending()))
    (lazy, lazy_left), (eager, eager_left) = runs
    assert len(lazy) == len(eager) > 60
    for a, b in zip(lazy, eager, strict=True):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert lazy_left.keys() == eager_left.keys()
    assert all(np.array_equal(lazy_left[k], eager_left[k]) for k in lazy_left)
