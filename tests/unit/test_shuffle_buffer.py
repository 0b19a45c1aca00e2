"""data/shuffle_buffer.py: exact batches, every row once, rows kept whole, seeded draws,
uniform within the buffer."""

import numpy as np
import pytest

from echoray.data.shuffle_buffer import (
    ShuffleBuffer,
    exact_batches,
    rows_before_first_batch,
    shuffled_batches,
)


def blocks_of(sizes: list[int]) -> list[dict]:
    out, start = [], 0
    for n in sizes:
        ids = np.arange(start, start + n, dtype=np.int64)
        out.append({"sample_id": ids, "epoch": ids % 3, "tokens": (ids[:, None] * 10 + np.arange(5)).astype(np.int64)})
        start += n
    return out


@pytest.mark.parametrize("buffer", [0, 8, 40, 1000])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_row_once_in_exact_batches_with_its_columns(buffer, seed):
    sizes = [5, 7, 0, 3, 11, 9, 2, 30, 1, 64]  # 132 rows, one empty block
    batches = list(shuffled_batches(blocks_of(sizes), 8, buffer, seed))
    assert [len(b["sample_id"]) for b in batches] == [8] * 16  # 132 rows: 16 batches, 4 dropped
    ids = np.concatenate([b["sample_id"] for b in batches])
    assert len(np.unique(ids)) == 128 and ids.min() >= 0 and ids.max() < 132
    for b in batches:  # every column moved with its row
        assert (b["epoch"] == b["sample_id"] % 3).all()
        assert (b["tokens"] == b["sample_id"][:, None] * 10 + np.arange(5)).all()
    if not buffer:
        assert ids.tolist() == list(range(128))  # stream order
    else:
        again = np.concatenate([b["sample_id"] for b in shuffled_batches(blocks_of(sizes), 8, buffer, seed)])
        assert (again == ids).all()  # seeded: one seed, one stream, the same batches
        other = np.concatenate([b["sample_id"] for b in shuffled_batches(blocks_of(sizes), 8, buffer, seed + 7)])
        assert (other != ids).any()


def test_a_batch_comes_once_the_buffer_holds_its_rows_and_only_from_them():
    """Draws are lazy: the first batch is drawn once `rows_before_first_batch` rows are in,
    from those rows only (the next block not read yet)."""
    read = []

    def tracked(blocks):
        for b in blocks:
            read.append(int(b["sample_id"][-1]) + 1)
            yield b

    it = shuffled_batches(tracked(blocks_of([10] * 10)), 8, 32, seed=3)
    first = next(it)
    assert rows_before_first_batch(32, 8) == 32 and read == [10, 20, 30, 40]  # 40 >= 32 after 4 blocks
    assert first["sample_id"].max() < 40
    assert rows_before_first_batch(4, 8) == 8 and rows_before_first_batch(None, 8) == 8


def test_draws_are_uniform_over_the_buffer():
    """With a buffer of 64 and batch 8, the first batch is 8 of the first 64 rows, each
    with probability 1/8. Over 4,000 seeds each row's count is Binomial(4000, 1/8): mean
    500, sd 20.9; every one of the 64 counts within 5 sd (a false failure about once in
    27,000 runs of this test), and the chi-square of the 64 counts under 120 (63 degrees
    of freedom: p about 1e-5)."""
    counts = np.zeros(64)
    for seed in range(4000):
        first = next(shuffled_batches(blocks_of([16] * 8), 8, 64, seed))
        counts[first["sample_id"]] += 1
    assert counts.sum() == 32000 and np.abs(counts - 500).max() < 5 * 20.9
    assert ((counts - 500) ** 2 / 500).sum() < 120


def test_take_fills_holes_from_the_tail_and_grows():
    buf = ShuffleBuffer(np.random.default_rng(0))
    buf.add(blocks_of([3])[0])
    buf.add(blocks_of([3, 50])[1])  # past the first capacity (6): grows
    assert buf.n == 53
    held = set(buf.cols["sample_id"][: buf.n].tolist())
    out = buf.take(20)
    left = buf.cols["sample_id"][: buf.n]
    assert buf.n == 33 and set(out["sample_id"].tolist()) | set(left.tolist()) == held
    assert not set(out["sample_id"].tolist()) & set(left.tolist())
    assert (buf.cols["tokens"][: buf.n] == left[:, None] * 10 + np.arange(5)).all()


def test_exact_batches_cut_consecutive_rows():
    got = list(exact_batches(blocks_of([5, 0, 20, 6]), 8))
    assert [b["sample_id"].tolist() for b in got] == [list(range(i, i + 8)) for i in (0, 8, 16)]
