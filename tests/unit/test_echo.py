import numpy as np
import pytest

from echoray.data.echo import batch_repeats, copy_counts, echo_keys, echo_rows, next_auto_factor


def batch(n, epoch=0):
    return {"epoch": np.full(n, epoch), "sample_id": np.arange(n), "x": np.arange(n) * 10,
            "echo_copy": np.zeros(n, dtype=np.int64)}


@pytest.mark.parametrize("e", [1, 2, 3, 5])
def test_integer_factor_repeats_each_item_exactly_e_times_adjacent(e):
    out = echo_rows(batch(50), float(e), seed=0)
    assert len(out["sample_id"]) == 50 * e
    ids, counts = np.unique(out["sample_id"], return_counts=True)
    assert np.all(counts == e) and len(ids) == 50
    assert np.array_equal(out["sample_id"], np.repeat(np.arange(50), e))
    assert np.array_equal(out["echo_copy"], np.tile(np.arange(e), 50))
    assert np.array_equal(out["x"], out["sample_id"] * 10)


@pytest.mark.parametrize("e", [1.3, 2.5, 3.75])
def test_fractional_factor_counts_and_mean(e):
    n = 200_000
    counts = copy_counts(echo_keys(0, np.zeros(n), np.arange(n)), e)
    assert set(np.unique(counts).tolist()) == {int(e), int(e) + 1}
    frac = e - int(e)
    sd = np.sqrt(frac * (1 - frac) / n)
    assert abs(counts.mean() - e) < 5 * sd  # about 0.005 for these factors


def test_fractional_draws_are_per_item_and_depend_on_epoch():
    keys0 = echo_keys(0, np.zeros(1000), np.arange(1000))
    keys1 = echo_keys(0, np.ones(1000), np.arange(1000))
    c0, c1 = copy_counts(keys0, 1.5), copy_counts(keys1, 1.5)
    assert 0 < (c0 == 2).sum() < 1000  # not one draw for all
    assert not np.array_equal(c0, c1)


def test_draws_do_not_depend_on_batching():
    whole = echo_rows(batch(100), 1.5, seed=4)
    b = batch(100)
    halves = [echo_rows({k: v[:37] for k, v in b.items()}, 1.5, 4),
              echo_rows({k: v[37:] for k, v in b.items()}, 1.5, 4)]
    assert np.array_equal(whole["sample_id"], np.concatenate([h["sample_id"] for h in halves]))


@pytest.mark.parametrize("bad", [0.5, 0.0, float("nan"), float("inf"), -1])
def test_invalid_factors_rejected(bad):
    with pytest.raises(ValueError, match="echo factor"):
        copy_counts(np.zeros(3, dtype=np.uint64), bad)


def test_batch_repeats_follow_the_same_rule():
    reps = [batch_repeats(0, i, 2.5) for i in range(4000)]
    assert set(reps) == {2, 3}
    assert abs(np.mean(reps) - 2.5) < 0.05
    assert batch_repeats(0, 7, 3.0) == 3


def test_auto_factor_moves_toward_r_smoothly_and_stays_bounded():
    e, path = 1.0, []
    for _ in range(12):
        e = next_auto_factor(e, 4.0, max_factor=8.0)
        path.append(e)
    assert path[0] == 2.5 and all(a <= b for a, b in zip(path, path[1:], strict=False))
    assert abs(path[-1] - 4.0) <= 0.2
    assert next_auto_factor(4.0, 4.1, 8.0) == 4.0  # inside the deadband: no change
    assert next_auto_factor(4.0, 100.0, 6.0) == 5.0 and next_auto_factor(5.0, 100.0, 6.0) == 5.5
    assert next_auto_factor(2.0, 0.3, 8.0) == 1.5  # R < 1 pulls e down to 1 at most
    assert next_auto_factor(3.0, float("nan"), 8.0) == 3.0
    assert next_auto_factor(1.0, 4.2, 8.0, first=True) == 4.2  # the first measurement: straight to R
    assert next_auto_factor(1.0, 12.0, 8.0, first=True) == 8.0  # ... never past max_factor
    noisy = [next_auto_factor(4.0, r, 8.0) for r in (3.9, 4.15, 3.85, 4.05)]
    assert noisy == [4.0] * 4


def test_emulated_latency_changes_after_the_set_time():
    import time

    from echoray.config import RemoteEmulation
    from echoray.config_load import load_config
    from echoray.data.sources import index_source
    from echoray.data.stages import Preprocess

    cfg = load_config(None, ["source.limit=64"])
    remote = RemoteEmulation(latency_ms=40, change_after_s=0.05, latency_ms_after=20)
    stage = Preprocess(index_source(cfg.source), 1, remote, None, 0, "none", 1.0)
    assert stage._remote_now().latency_ms == 40  # the clock starts at the first read
    time.sleep(0.06)
    assert stage._remote_now().latency_ms == 20
    with pytest.raises(ValueError, match="change_after_s and latency_ms_after go together"):
        RemoteEmulation(latency_ms=40, change_after_s=1.0)
