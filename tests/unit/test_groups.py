"""Rank logic of batch augmentation, every rank in one process (as timm tests its
distributed sampler): shard map, views and keys per member, steps per epoch and
batch-echo repeats, without a cluster."""

import numpy as np
import pytest

from echoray.config import PipelineConfig
from echoray.data.echo import batch_repeats
from echoray.echo_plan import EchoPlan
from echoray.train.batch_augment import step_counts, view_indices, view_keys
from echoray.train.consumption_echo import BatchEchoDraws
from echoray.train.groups import rank_layout, shard_map

LAYOUTS = [(4, 2, "grouped"), (4, 4, "grouped"), (8, 4, "grouped"), (4, 2, "local"), (1, 4, "local")]


def shard_batch(shard: int, readers: int, n_train: int, b: int, step: int) -> dict[str, np.ndarray]:
    """Step `step`'s batch of a shard: a stand-in for streaming_split's disjoint shards."""
    ids = np.arange(n_train)[shard::readers][step * b : (step + 1) * b]
    return {"epoch": np.zeros(b, np.int64), "sample_id": ids, "echo_copy": np.zeros(b, np.int64)}


@pytest.mark.parametrize(("world", "copies", "mode"), LAYOUTS)
def test_shard_map_groups_and_leaders(world, copies, mode):
    layouts = [rank_layout(r, world, copies, mode) for r in range(world)]
    shards = shard_map(world, copies, mode)
    readers = world // copies if mode == "grouped" else world
    assert {lay.readers for lay in layouts} == {readers} and sorted(set(shards)) == list(range(readers))
    for g in range(readers):
        ranks = [r for r in range(world) if shards[r] == g]
        size = copies if mode == "grouped" else 1
        assert ranks == list(range(g * size, (g + 1) * size))  # contiguous groups of M (or 1)
        assert [layouts[r].member for r in ranks] == list(range(size))
        assert {layouts[r].leader for r in ranks} == {ranks[0]}
        assert [layouts[r].reads for r in ranks] == [True] + [False] * (size - 1)  # one read per group


@pytest.mark.parametrize(("world", "copies", "mode"), LAYOUTS)
def test_each_group_makes_m_views_of_each_sample_and_no_worker_holds_two(world, copies, mode):
    n_train, b, seed = 96, 8, 3
    layouts = [rank_layout(r, world, copies, mode) for r in range(world)]
    plan = EchoPlan.from_config(PipelineConfig())
    spe = {plan.steps_per_shard_epoch(b, n_train, lay.readers) for lay in layouts}
    assert len(spe) == 1  # every rank takes the same number of steps: DDP stays in lockstep
    (steps,) = spe
    assert steps == n_train // (layouts[0].readers * b)
    views_of = {}  # (epoch, sample) -> keys over all ranks
    fresh = samples = trained = 0
    for step in range(steps):
        for lay in layouts:
            bt = shard_batch(lay.group, lay.readers, n_train, b, step)
            views = view_indices(copies, mode, lay.member)
            keys = view_keys(seed, bt, False, views)
            sids = np.tile(bt["sample_id"], len(views))
            if mode == "grouped":
                assert len(set(sids.tolist())) == len(sids)  # one view of each sample per worker
            for sid, k in zip(sids.tolist(), keys.tolist(), strict=True):
                views_of.setdefault(sid, []).append(k)
            t, s = step_counts(len(bt["sample_id"]), len(views), lay.reads)
            fresh += len(bt["sample_id"]) if lay.reads else 0  # no echo: every read sample is fresh
            trained, samples = trained + t, samples + s
    assert sorted(views_of) == list(range(n_train))  # every sample of the epoch trained, in one group
    for sid, keys in views_of.items():
        assert len(keys) == copies and len(set(keys)) == copies  # M distinct views per sample
        local = view_keys(seed, shard_batch(0, 1, n_train, n_train, 0), False, np.arange(copies)).reshape(copies, -1)
        assert sorted(keys) == sorted(local[:, sid].tolist())  # the same views in both modes
    assert fresh == samples == n_train and trained == copies * n_train


@pytest.mark.parametrize(("world", "copies", "mode"), [(4, 2, "grouped"), (4, 2, "local")])
def test_batch_echo_repeats_match_on_every_rank(world, copies, mode):
    cfg = PipelineConfig.model_validate({
        "preprocess": {"augment": {"on": "worker"}}, "echo": {"stage": "batch", "factor": 1.7},
        "batch_augmentation": {"copies": copies, "mode": mode}, "scaling": {"num_workers": world}})
    per_rank = [[BatchEchoDraws(cfg.seed, cfg.echo.factor, r, None, None)(i) for i in range(2000)]
                for r in range(world)]
    assert all(p == per_rank[0] for p in per_rank)  # not keyed by rank: members step together
    assert per_rank[0] == [batch_repeats(cfg.seed, i, 1.7) for i in range(2000)]
    assert abs(np.mean(per_rank[0]) - 1.7) < 0.04  # 2000 draws of {1, 2}, p = 0.7: sd of the mean 0.010
    readers = rank_layout(0, world, copies, mode).readers
    spe = EchoPlan.from_config(cfg).steps_per_shard_epoch(8, 96, readers)
    assert spe == round(96 // (readers * 8) * 1.7)


def test_grouped_layout_rejects_a_world_not_divisible_by_m():
    with pytest.raises(ValueError, match="batch_augmentation.copies=4"):
        rank_layout(0, 6, 4, "grouped")
