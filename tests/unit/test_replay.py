"""Restoring the stream from a checkpoint: consumed rows are skipped, nothing is read twice
or lost, closed epochs stay closed (pure numpy; the Ray run is in integration tests)."""

from collections import Counter

import numpy as np
import pytest

from echoray.accounting.consumed import (
    ConsumedLog,
    drop_consumed,
    expected_rows,
    first_open_epoch,
    row_keys,
)
from echoray.config_load import ConfigError, load_config
from echoray.data.echo import echo_rows
from echoray.data.plan import read_plan

IDS = np.arange(100, 160, dtype=np.int64)  # 60 training ids, not starting at 0


def plan_rows(seed, epochs, first_epoch=0):
    blocks = read_plan(seed, epochs, len(IDS), block_chunks=7, first_epoch=first_epoch)
    epoch = np.concatenate([b["epoch"] for b in blocks])
    sid = IDS[np.concatenate([b["chunk"] for b in blocks])]
    return {"epoch": epoch, "sample_id": sid, "echo_copy": np.zeros(len(sid), np.int64)}


def test_read_plan_from_a_later_epoch_is_the_tail_of_the_whole_plan():
    whole, tail = plan_rows(3, 5), plan_rows(3, 5, first_epoch=2)
    at = whole["epoch"] >= 2
    assert np.array_equal(whole["sample_id"][at], tail["sample_id"]) and tail["epoch"].min() == 2
    assert read_plan(3, 5, 10, first_epoch=5) == []


def test_drop_consumed_removes_exactly_the_logged_rows_of_their_epochs():
    rows = echo_rows({"epoch": np.array([0, 0, 1, 1]), "sample_id": np.array([7, 8, 7, 8]),
                      "echo_copy": np.zeros(4, np.int64)}, 2.0, seed=0)
    consumed = {0: np.sort(row_keys(np.array([7, 8]), np.array([1, 0])))}
    kept = drop_consumed(rows, consumed)
    assert list(zip(kept["epoch"], kept["sample_id"], kept["echo_copy"], strict=True)) == [
        (0, 7, 0), (0, 8, 1), (1, 7, 0), (1, 7, 1), (1, 8, 0), (1, 8, 1)]
    assert drop_consumed(rows, None) is rows
    with pytest.raises(ValueError, match="does not fit"):
        row_keys(np.array([1]), np.array([1 << 16]))


def test_expected_rows_follow_the_echo_draws():
    assert expected_rows(0, 3, IDS, "none", 1.0) == expected_rows(0, 3, IDS, "batch", 2.0) == 60
    assert expected_rows(0, 3, IDS, "after_augment", 2.0) == 120
    drawn = echo_rows({"epoch": np.full(60, 3), "sample_id": IDS, "echo_copy": np.zeros(60, np.int64)}, 1.5, 0)
    assert expected_rows(0, 3, IDS, "before_augment", 1.5) == len(drawn["sample_id"])
    assert expected_rows(0, 3, IDS, "before_augment", "auto") is None


def test_first_open_epoch_fixed_auto_and_never_reopened():
    exp = lambda e: 10  # noqa: E731
    assert first_open_epoch(np.array([10, 9, 0]), np.array([10, 9, 0]), exp, 10) == 1
    assert first_open_epoch(np.array([10, 10, 10]), np.array([10, 10, 10]), exp, 10) == 3
    # keys of epochs 0-1 were dropped at an earlier checkpoint: their zero counts mean nothing
    assert first_open_epoch(np.array([0, 0, 4]), np.array([0, 0, 4]), exp, 10, done_before=2) == 2
    auto = lambda e: None  # noqa: E731
    # under auto an epoch closes once its fresh rows and the next epoch's are all consumed
    assert first_open_epoch(np.array([25, 22, 3]), np.array([10, 10, 3]), auto, 10) == 1


def test_consumed_log_counts_and_forgets_closed_epochs():
    log = ConsumedLog({0: np.array([5 << 16])})
    log.add(np.array([0, 1, 1]), np.array([6, 6, 7]), np.array([0, 1, 0]))
    rows, fresh = log.counts(3)
    assert rows.tolist() == [2, 2, 0] and fresh.tolist() == [2, 1, 0]
    kept = log.keep_from(1)
    assert list(kept) == [1] and kept[1].tolist() == sorted([(6 << 16) | 1, 7 << 16])
    assert log.counts(3)[0].tolist() == [0, 2, 0]


@pytest.mark.parametrize("factor, stage", [(1.0, "none"), (2.0, "after_augment"), (1.5, "before_augment")])
def test_a_stream_restored_mid_run_consumes_every_row_exactly_once(factor, stage):
    """Model the worker: a shuffle buffer takes rows from the stream; at a checkpoint the
    consumed keys of the open epochs are kept; the restored stream skips them."""
    seed, epochs, buffer, rng = 5, 4, 8, np.random.default_rng(0)

    def stream(first_epoch=0, consumed=None):
        rows = plan_rows(seed, epochs, first_epoch)
        if stage != "none":
            rows = echo_rows(rows, factor, seed)
        return drop_consumed(rows, consumed)

    def consume(rows, n, log):
        """Take n rows through a shuffle buffer: rows leave in a random order."""
        taken, pending = [], list(range(len(rows["sample_id"])))
        window = pending[:buffer]
        pending = pending[buffer:]
        while len(taken) < n and window:
            i = window.pop(int(rng.integers(len(window))))
            taken.append(i)
            if pending:
                window.append(pending.pop(0))
        idx = np.array(taken)
        log.add(rows["epoch"][idx], rows["sample_id"][idx], rows["echo_copy"][idx])
        return [(int(rows["epoch"][i]), int(rows["sample_id"][i]), int(rows["echo_copy"][i])) for i in taken]

    first = stream()
    log = ConsumedLog()
    before = consume(first, len(first["sample_id"]) * 5 // 8, log)  # the "checkpoint": 2.5 epochs in
    rows, fresh = log.counts(epochs)
    start = first_open_epoch(rows, fresh, lambda e: expected_rows(seed, e, IDS, stage, factor), len(IDS))
    kept = log.keep_from(start)
    assert start >= 1 and all(e >= start for e in kept)
    restored = stream(start, kept)
    after = consume(restored, len(restored["sample_id"]), ConsumedLog())
    together = Counter(before + after)
    want = Counter(zip(first["epoch"].tolist(), first["sample_id"].tolist(), first["echo_copy"].tolist(),
                       strict=True))
    assert together == want  # each (epoch, sample, copy) once: nothing twice, nothing lost


def test_max_failures_needs_checkpoints():
    with pytest.raises(ConfigError, match="scaling.max_failures.*train.checkpoint_every"):
        load_config(None, ["scaling.max_failures=2", "train.checkpoint_every=0"])
    cfg = load_config(None, ["scaling.max_failures=-1"])
    assert cfg.train.checkpoint_every >= 1 and cfg.scaling.max_failures == -1
