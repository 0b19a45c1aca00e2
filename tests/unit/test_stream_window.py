"""The shared stream's window (tune/stream_window.py) for several consumers in one process,
the producer's read counts (tune/read_counts.py) and the consumer's batching
(data/shuffle_buffer.py shuffled_batches, which tune/share_consumer.py uses): exact positions, holds and rows."""

import numpy as np
import pytest

from echoray.data.shuffle_buffer import shuffled_batches
from echoray.tune.read_counts import ReadCounter
from echoray.tune.stream_window import StreamWindow


def fill(w: StreamWindow, rows: int = 10) -> int:
    """Append blocks while the producer may; how many."""
    n = 0
    while w.can_produce():
        w.append(rows, f"b{w.head // rows}")
        n += 1
    return n


def test_the_first_window_is_made_before_anyone_attaches_and_read_from_row_0():
    w = StreamWindow(30)
    assert w.can_produce() and w.held_rows() == 0
    assert fill(w) == 3 and w.held_rows() == 30 and not w.can_produce()  # the bound, in rows
    assert w.attach("a") == 0 and w.attach("b") == 0
    assert w.advance("a").item == "b0" and w.held_rows() == 30  # "b" still holds b0


def test_the_bound_is_exceeded_by_at_most_one_block():
    w = StreamWindow(25)
    w.attach("a")
    assert fill(w) == 3 and w.held_rows() == 30 and w.peak_rows == 30


def test_the_slowest_consumer_holds_the_window_and_backpressure_follows_it():
    w = StreamWindow(30)
    w.attach("fast"), w.attach("slow")
    fill(w)
    assert [w.advance("fast").item for _ in range(3)] == ["b0", "b1", "b2"]
    assert w.advance("fast") is None  # at the head
    assert not w.can_produce() and w.held_rows() == 30  # "slow" has taken nothing
    assert w.advance("slow").item == "b0"
    assert w.base == 10 and w.held_rows() == 20 and w.can_produce()
    assert fill(w) == 1 and w.head == 40
    assert w.positions == {"fast": 30, "slow": 10}
    assert w.slowest() == "slow"


def test_a_detached_consumer_holds_nothing_at_once():
    w = StreamWindow(30)
    w.attach("a"), w.attach("stuck")
    fill(w)
    for _ in range(3):
        w.advance("a")
    assert not w.can_produce()
    w.detach("stuck")
    assert w.held_rows() == 0 and w.base == w.head == 30 and w.can_produce()
    w.detach("stuck")  # twice: no error
    w.detach("a")
    assert not w.can_produce()  # everyone has left: the stream waits where it stands


def test_a_late_consumer_starts_at_the_oldest_held_block_and_reads_on_from_there():
    w = StreamWindow(40)
    w.attach("a")
    assert fill(w) == 4  # b0..b3
    w.advance("a"), w.advance("a")  # a at 20: b0, b1 released
    assert w.attach("late") == 20  # where the slowest stands, not the head (40)
    assert [w.advance("late").item for _ in range(2)] == ["b2", "b3"]
    w.detach("a"), w.detach("late")
    assert fill(w) == 0  # nobody attached any more: nothing
    assert w.attach("later") == 40 == w.head  # nothing held: the head
    assert fill(w) == 4 and w.advance("later").item == "b4"


def test_what_the_last_consumer_leaves_unread_waits_for_the_next_one():
    # A search's first wave of trials ends, the next starts: the window the first left is
    # read by the next, not dropped (the stream would have read those rows for nobody).
    w = StreamWindow(30)
    w.attach("a"), w.attach("b")
    assert fill(w) == 3
    w.advance("a"), w.advance("b")  # both at 10: b0 released
    w.detach("a")
    assert w.held_rows() == 20  # "b" still reads b1, b2
    w.detach("b")
    assert w.held_rows() == 20 and w.base == 10 and not w.can_produce()  # kept; nothing produced
    assert w.attach("next") == 10  # where "b" left, not the head (30)
    assert [w.advance("next").item for _ in range(2)] == ["b1", "b2"] and w.held_rows() == 0
    assert fill(w) == 3 and w.advance("next").item == "b3"  # and on from there


def test_every_consumer_sees_every_block_once_in_order_whatever_the_interleaving():
    rng = np.random.default_rng(0)
    w = StreamWindow(50)
    seen: dict[str, list[tuple[int, int]]] = {"a": [], "b": [], "c": []}
    starts = {"a": w.attach("a"), "b": w.attach("b")}
    for step in range(400):
        if step == 37:
            starts["c"] = w.attach("c")
        if w.can_produce() and rng.random() < 0.5:
            rows = int(rng.integers(1, 9))
            w.append(rows, (w.head, rows))  # the item: (start row, rows)
        for who in [k for k in seen if k in w.positions]:
            if rng.random() < (0.2 if who == "b" else 0.6):
                block = w.advance(who)
                if block is not None:
                    seen[who].append(block.item)
        assert w.held_rows() <= 50 + 8  # the bound plus one block, always
        assert w.base == min(w.positions.values(), default=w.head)
    assert 0 < starts["c"] and all(len(v) > 20 for v in seen.values())
    for who, items in seen.items():  # consecutive blocks from its start: none skipped or repeated
        assert items[0][0] == starts[who]
        assert all(nxt[0] == cur[0] + cur[1] for cur, nxt in zip(items, items[1:], strict=False))
        assert w.positions[who] == items[-1][0] + items[-1][1]


def test_finish_ends_the_stream_for_consumers_at_the_head():
    w = StreamWindow(30)
    w.attach("a")
    w.append(5, "x")
    w.finish()
    assert not w.can_produce() and not w.at_end("a")
    assert w.advance("a").item == "x" and w.at_end("a")
    with pytest.raises(ValueError, match="finished"):
        w.append(5, "y")


def test_bad_uses_are_refused():
    with pytest.raises(ValueError, match="at least 1"):
        StreamWindow(0)
    w = StreamWindow(10)
    w.attach("a")
    with pytest.raises(ValueError, match="already attached"):
        w.attach("a")
    with pytest.raises(ValueError, match="at least one row"):
        w.append(0, "empty")
    assert w.state() == {"head": 0, "base": 0, "held_rows": 0, "bound_rows": 10, "peak_rows": 0, "peak_bytes": 0,
                         "finished": False, "positions": {"a": 0}}


def test_held_bytes_follow_the_held_blocks():
    w = StreamWindow(100)
    w.attach("a")
    w.append(10, "x", nbytes=1000)
    w.append(10, "y", nbytes=500)
    assert w.held_bytes() == 1500 == w.peak_bytes
    w.advance("a")
    assert w.held_bytes() == 500 and w.peak_bytes == 1500


def test_read_counts_per_epoch():
    c = ReadCounter(10)
    c.add(np.array([0, 0, 0]), np.array([1, 2, 3]))
    c.add(np.array([0, 1, 1]), np.array([4, 1, 1]))  # sample 1 twice in epoch 1
    assert c.summary() == {0: {"rows": 4, "distinct": 4, "max_count": 1, "late_rows": 0},
                           1: {"rows": 2, "distinct": 1, "max_count": 2, "late_rows": 0}}
    c.add(np.array([2, 5]), np.array([0, 0]))  # epoch 5 arrives: epochs 0 and 1 are summarised
    assert sorted(c.open) == [2, 5] and sorted(c.closed) == [0, 1]
    assert c.summary()[0] == {"rows": 4, "distinct": 4, "max_count": 1, "late_rows": 0}
    c.add(np.array([0]), np.array([5]))  # a late row of a summarised epoch: counted as late
    assert c.summary()[0] == {"rows": 5, "distinct": 4, "max_count": 1, "late_rows": 1}


def blocks_of(sizes: list[int]) -> list[dict]:
    out, start = [], 0
    for n in sizes:
        ids = np.arange(start, start + n)
        out.append({"sample_id": ids, "epoch": np.zeros(n, np.int64), "image": ids[:, None] * np.ones((1, 3))})
        start += n
    return out


@pytest.mark.parametrize("buffer", [None, 16])
def test_shuffled_batches_are_exact_and_keep_rows_together(buffer):
    batches = list(shuffled_batches(blocks_of([5, 7, 3, 11, 9, 2]), 8, buffer, seed=1))
    assert [len(b["sample_id"]) for b in batches] == [8, 8, 8, 8, 4][:4]  # 37 rows: 4 batches, 5 dropped
    ids = np.concatenate([b["sample_id"] for b in batches])
    assert len(set(ids.tolist())) == 32 and set(ids.tolist()) <= set(range(37))
    for b in batches:  # every column moved with its row
        assert (b["image"][:, 0] == b["sample_id"]).all()
    if buffer is None:
        assert ids.tolist() == list(range(32))  # stream order
    else:
        assert ids.tolist() != list(range(32))
        again = np.concatenate([b["sample_id"] for b in shuffled_batches(blocks_of([5, 7, 3, 11, 9, 2]), 8, buffer, 1)])
        assert (again == ids).all()  # seeded
