"""The public building blocks (echoray.data, echoray.train, echoray.tune), without Ray:
the echo operator's counts, exact fresh counting across ranks, consumption-side echo,
grouped batch augmentation's keys and seeds, the searcher for a plain Tuner."""

import subprocess
import sys
import threading

import numpy as np
import pytest

import echoray.data as ed
import echoray.train as et
import echoray.tune as eu
from echoray.seeds import STREAM_SAMPLER, derive_seed
from helpers import REPO


def test_importing_the_three_packages_imports_neither_torch_nor_ray():
    platform = str(REPO / "platform")
    code = (f"import sys; sys.path.insert(0, {platform!r}); import echoray.data, echoray.train, echoray.tune; "
            "echoray.data.echo_batch; print('torch' in sys.modules, 'ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    assert set(ed.__all__) >= {"echo_dataset", "echo_batch", "echo_batches", "repeat_epochs", "augment_images"}
    assert set(et.__all__) >= {"FreshCounter", "echo_on_consumption", "group_layout", "group_batches", "view_keys"}
    assert eu.__all__ == ["QuasiRandomSearcher"]


def batch(n, epoch=0, start=0):
    return {"sample_id": np.arange(start, start + n), "epoch": np.full(n, epoch), "x": np.arange(n) * 10}


def test_echo_batch_integer_factor_is_exact_and_copies_are_marked():
    out = ed.echo_batch(batch(5), 3)
    assert out["sample_id"].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    assert out["echo_copy"].tolist() == [0, 1, 2] * 5 and set(out["echo_copies"]) == {3}
    assert out["x"].tolist() == np.repeat(np.arange(5) * 10, 3).tolist()
    one = ed.echo_batch({"sample_id": np.arange(3)}, 1)
    assert one["echo_copy"].tolist() == [0, 0, 0] and one["epoch"].tolist() == [0, 0, 0]


def test_echo_batch_fractional_factor_follows_its_keys_not_the_batching():
    whole = ed.echo_batch(batch(4000, epoch=2), 1.25, seed=3)
    halves = [ed.echo_batch({k: v[s] for k, v in batch(4000, epoch=2).items()}, 1.25, seed=3)
              for s in (slice(0, 1234), slice(1234, None))]
    assert np.array_equal(np.concatenate([h["sample_id"] for h in halves]), whole["sample_id"])
    counts = ed.expected_copies(np.arange(4000), np.full(4000, 2), 1.25, seed=3)
    assert np.array_equal(np.bincount(whole["sample_id"], minlength=4000), counts)
    assert set(counts) == {1, 2} and abs(counts.mean() - 1.25) < 0.02
    other_epoch = ed.expected_copies(np.arange(4000), np.full(4000, 3), 1.25, seed=3)
    assert not np.array_equal(counts, other_epoch)  # each epoch draws anew


@pytest.mark.parametrize("factor", [0.5, float("inf"), "2", True])
def test_echo_refuses_bad_factors(factor):
    with pytest.raises(ValueError, match="echo factor must be a finite number >= 1"):
        ed.echo_batch(batch(2), factor)


class Gather:
    """all_gather_object among threads (one per rank)."""

    def __init__(self, world):
        self.world, self.box, self.barrier = world, [None] * world, threading.Barrier(world)

    def rank(self, r):
        def gather(obj):
            self.box[r] = obj
            self.barrier.wait()
            out = list(self.box)
            self.barrier.wait()
            return out
        return gather


def run_ranks(world, fn):
    results, g = [None] * world, Gather(world)
    threads = [threading.Thread(target=lambda r=r: results.__setitem__(r, fn(r, g.rank(r)))) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_fresh_counter_is_exact_when_copies_of_a_sample_reach_two_ranks():
    echoed = ed.echo_batch(batch(50), 2.5, seed=1)  # (epoch 0, sample 0..49), 2 or 3 copies each
    perm = np.random.default_rng(0).permutation(len(echoed["sample_id"]))
    rows = {k: v[perm] for k, v in echoed.items()}
    halves = np.array_split(np.arange(len(perm)), 2)  # copies land on both ranks

    def rank(r, gather):
        counter = et.FreshCounter()
        part = {k: v[halves[r]] for k, v in rows.items()}
        for chunk in np.array_split(np.arange(len(halves[r])), 4):
            counter.update({k: v[chunk] for k, v in part.items()})
        before = counter.local
        return before, counter.total(gather=gather, rank=r)

    (b0, t0), (b1, t1) = run_ranks(2, rank)
    assert b0 + b1 > 50  # both ranks counted some samples
    assert t0 == t1 == 50


def test_fresh_counter_counts_each_epoch_and_restores_from_its_state():
    counter = et.FreshCounter()
    echoed = ed.echo_batch(batch(10, epoch=0), 2)
    assert counter.update({k: v[:11] for k, v in echoed.items()}) == 6
    restored = et.FreshCounter(counter.state_dict())
    assert restored.update({k: v[11:] for k, v in echoed.items()}) == 4
    assert restored.update(batch(10, epoch=1)) == 10  # no echo_copies: each row its sample's only copy
    assert restored.total() == 20


def test_consumption_echo_makes_exact_batches_with_the_live_factor():
    factors = iter([1.0, 3.0, 3.0, 2.0])
    fresh = [batch(8, start=8 * i) for i in range(4)]
    out = list(et.echo_on_consumption(fresh, lambda: next(factors), batch_size=8, buffer_rows=16, sampler_seed=1))
    assert all(len(b["sample_id"]) == 8 for b in out)
    ids = np.concatenate([b["sample_id"] for b in out])
    counts = np.bincount(ids, minlength=32)
    assert len(ids) == 8 * ((8 + 24 + 24 + 16) // 8)
    assert counts[:8].tolist() == [1] * 8 and counts[8:24].tolist() == [3] * 16 and counts[24:].tolist() == [2] * 8
    counter = et.FreshCounter()
    assert sum(counter.update(b) for b in out) == 32


def test_consumption_echo_ranks_stop_together():
    def rank(r, gather):
        rows = [batch(8 + 4 * r, start=100 * r)]
        return len(list(et.echo_on_consumption(rows, 2.0, batch_size=4, buffer_rows=64, gather=gather)))

    assert run_ranks(2, rank) == [4, 4]  # rank 0 can fill 4 batches, rank 1 six: both take 4


def test_grouped_layout_one_view_per_member_matching_echorays_keys():
    from echoray.train.batch_augment import view_keys as internal_keys

    layouts = [et.group_layout(r, 6, 3) for r in range(6)]
    assert [(lay.group, lay.member, lay.leader, lay.reads) for lay in layouts] == [
        (0, 0, 0, True), (0, 1, 0, False), (0, 2, 0, False), (1, 0, 3, True), (1, 1, 3, False), (1, 2, 3, False)]
    b = {**batch(5, epoch=1), "echo_copy": np.array([0, 1, 0, 2, 0])}
    keys = [et.view_keys(9, b, layouts[m], per_copy=True) for m in range(3)]
    assert np.array_equal(np.concatenate(keys), internal_keys(9, b, True, np.arange(3)))  # local mode's M views
    assert len({int(k) for ks in keys for k in ks}) == 15
    assert et.sampling_seed(9, 1) == derive_seed(9, STREAM_SAMPLER, 1)
    assert et.dropout_seed(9, 0) != et.dropout_seed(9, 1)
    with pytest.raises(ValueError, match="not a multiple"):
        et.group_layout(0, 5, 2)


def test_searcher_from_space_for_a_plain_tuner():
    from ray.tune import uniform
    from ray.tune.search import Searcher

    space = {"lr": {"low": 1e-3, "high": 1.0, "scale": "log"}, "width": {"choices": [16, 32]}}
    s = eu.QuasiRandomSearcher.from_space(space, trials=3, repeats=2, seed=4)
    assert len(s) == 6
    assert s.set_search_properties("acc", "max", {"epochs": 2})
    configs = [s.suggest(f"t{i}") for i in range(6)]
    assert s.suggest("t6") == Searcher.FINISHED
    assert [(c["repeat"], c["index"]) for c in configs] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert all(c["epochs"] == 2 and 1e-3 <= c["lr"] < 1.0 and c["width"] in (16, 32) for c in configs)
    again = eu.QuasiRandomSearcher.from_space(space, trials=3, repeats=2, seed=4)
    again.set_state({**s.get_state(), "next_point": 4})
    assert again.suggest("x")["lr"] == configs[4]["lr"]
    with pytest.raises(ValueError, match="different search"):
        eu.QuasiRandomSearcher.from_space(space, trials=3, repeats=2, seed=5).set_state(s.get_state())
    with pytest.raises(ValueError, match="reserved"):
        eu.QuasiRandomSearcher.from_space({"repeat": {"choices": [1]}}, trials=2)
    with pytest.raises(ValueError, match=r"param_space entries \['lr'\] are search spaces"):
        s.set_search_properties(None, None, {"lr": uniform(0, 1)})
