import numpy as np

from echoray.data.plan import chunk_ids, epoch_order, num_chunks, read_plan, split_holdout
from echoray.seeds import derive_seed, mix, uniform


def test_mix_is_deterministic_and_sensitive_to_every_part():
    a = mix(1, 2, np.arange(5))
    assert np.array_equal(a, mix(1, 2, np.arange(5)))
    assert len(set(a.tolist())) == 5
    assert not np.array_equal(a, mix(1, 3, np.arange(5)))
    assert not np.array_equal(mix(1, 2), mix(2, 1))


def test_uniform_is_in_unit_interval_and_roughly_flat():
    u = uniform(mix(7, np.arange(100_000)), 0)
    assert u.min() >= 0 and u.max() < 1
    hist, _ = np.histogram(u, bins=10, range=(0, 1))
    assert np.all(np.abs(hist - 10_000) < 500)
    assert not np.array_equal(u, uniform(mix(7, np.arange(100_000)), 1))


def test_derive_seed_is_a_nonnegative_int():
    s = derive_seed(0, 4, 1)
    assert isinstance(s, int) and s >= 0 and s == derive_seed(0, 4, 1) != derive_seed(0, 4, 2)


def test_read_plan_covers_each_chunk_once_per_epoch_in_new_orders():
    blocks = read_plan(seed=3, epochs=4, n_chunks=10, block_chunks=4)
    epochs = np.concatenate([b["epoch"] for b in blocks])
    chunks = np.concatenate([b["chunk"] for b in blocks])
    assert len(chunks) == 40
    orders = [chunks[epochs == e] for e in range(4)]
    for order in orders:
        assert sorted(order.tolist()) == list(range(10))
    assert len({tuple(o) for o in orders}) == 4
    assert np.array_equal(orders[0], epoch_order(3, 0, 10))


def test_chunks_cover_the_training_ids_exactly():
    train_ids = np.array([0, 2, 3, 5, 7, 8, 9])
    n = num_chunks(len(train_ids), 3)
    assert n == 3
    parts = chunk_ids(train_ids, np.arange(n), 3)
    assert np.array_equal(np.concatenate(parts), train_ids)
    assert [len(p) for p in parts] == [3, 3, 1]


def test_holdout_split_is_disjoint_complete_and_fixed():
    tr, ev = split_holdout(100, 0.2, seed=0)
    assert len(ev) == 20 and len(tr) == 80
    assert sorted(np.concatenate([tr, ev]).tolist()) == list(range(100))
    tr2, ev2 = split_holdout(100, 0.2, seed=0)
    assert np.array_equal(ev, ev2)
