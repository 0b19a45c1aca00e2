"""Auto echo at consumption time (train/consumption_echo.py): the factor of the moment a
row is taken is the factor it is trained with, counts stay exact, ranks stay in step."""

import threading

import numpy as np

from echoray.data.echo import copy_counts, echo_keys
from echoray.train.consumption_echo import ConsumptionEcho, agree_min
from echoray.train.fresh import FreshTracker, sample_keys

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
