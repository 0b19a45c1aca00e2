"""Which trials of a search share one preprocessing stream (tune/share_groups.py), how a
shared group's stream is sized, how many trials fit the CPUs with shared producers
(tune/share_plan.py fit_concurrency), and the consumer-side echo plan (echo_plan.py)."""

import pytest

from echoray.config import PipelineConfig
from echoray.echo_plan import EchoPlan
from echoray.tune.share_groups import group_trials, stream_epochs, upstream_key, window_rows
from echoray.tune.share_plan import SharePlan, fit_concurrency

BASE = {
    "seed": 3,
    "source": {"kind": "digits", "image_size": 16, "chunk_size": 1},
    "preprocess": {"augment": {"on": "cpu", "ops": [{"op": "random_crop", "padding": 2}]}, "batch_size": 128},
    "echo": {"stage": "after_augment", "factor": 2.0, "shuffle_buffer": 512},
    "train": {"batch_size": 64, "max_epochs": 4},
}


def cfg(**changes) -> PipelineConfig:
    """BASE with dotted changes, e.g. cfg(**{"optimizer.lr": 0.1})."""
    import copy

    tree = copy.deepcopy(BASE)
    for key, value in changes.items():
        *parents, leaf = key.split(".")
        node = tree
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return PipelineConfig.model_validate(tree)


# Values a search varies downstream of the stream: one group.
DOWNSTREAM = [
    {"optimizer.lr": 0.3}, {"optimizer.momentum": 0.5}, {"optimizer.name": "adamw"},
    {"schedule.name": "constant"}, {"model.width": 8}, {"echo.factor": 3.0}, {"echo.stage": "none"},
    {"echo.stage": "batch"}, {"echo.shuffle_buffer": 0}, {"train.batch_size": 32}, {"train.max_epochs": 9},
    {"train.target": 0.5}, {"preprocess.mean": [0.5], "preprocess.std": [0.2]}, {"audit.enabled": True},
    {"scaling.cpus_per_worker": 0.5},
]
# With the augmentation on the worker, what the worker does with its rows is its own too.
ON_WORKER = {"preprocess.augment.on": "worker"}
DOWNSTREAM_ON_WORKER = [
    {"echo.stage": "before_augment"}, {"batch_augmentation.copies": 2}, {"batch_augmentation.tta_views": 2},
    {"preprocess.augment.ops": [{"op": "random_crop", "padding": 4}, {"op": "flip"}]},
]
# Values upstream of a trial's own stages: each its own group.
UPSTREAM = [
    {"seed": 4}, {"source.chunk_size": 2}, {"source.image_size": 12}, {"source.limit": 500},
    {"source.holdout_fraction": 0.3}, {"preprocess.batch_size": 64}, {"preprocess.deterministic": False},
    {"preprocess.actors.num_cpus": 1.0}, {"preprocess.augment.ops": [{"op": "random_crop", "padding": 4}]},
    {"preprocess.augment.ops": []},
]


@pytest.mark.parametrize("change", DOWNSTREAM, ids=lambda c: ",".join(c))
def test_downstream_values_do_not_split_a_group(change):
    groups = group_trials({"r0-t0": cfg(), "r0-t1": cfg(**change), "r0-t2": cfg()})
    assert [(g.name, g.trials, g.shared) for g in groups] == [("g0", ("r0-t0", "r0-t1", "r0-t2"), True)]
    assert upstream_key(cfg()) == upstream_key(cfg(**change)) == groups[0].key


@pytest.mark.parametrize("change", DOWNSTREAM_ON_WORKER, ids=lambda c: ",".join(c))
def test_worker_side_values_do_not_split_a_group(change):
    groups = group_trials({"r0-t0": cfg(**ON_WORKER), "r0-t1": cfg(**ON_WORKER, **change)})
    assert [(g.trials, g.shared) for g in groups] == [(("r0-t0", "r0-t1"), True)]


@pytest.mark.parametrize("change", UPSTREAM, ids=lambda c: ",".join(c))
def test_upstream_values_split_groups(change):
    groups = group_trials({"r0-t0": cfg(), "r0-t1": cfg(**change), "r0-t2": cfg(), "r0-t3": cfg(**change)})
    assert [(g.name, g.trials, g.shared) for g in groups] == [
        ("g0", ("r0-t0", "r0-t2"), True), ("g1", ("r0-t1", "r0-t3"), True)]
    assert groups[0].key != groups[1].key


def test_the_augmentation_of_a_worker_is_downstream():
    on_worker = {"preprocess.augment.on": "worker"}
    a = cfg(**on_worker)
    b = cfg(**on_worker, **{"preprocess.augment.ops": [{"op": "random_crop", "padding": 4}]})
    assert upstream_key(a) == upstream_key(b) != upstream_key(cfg())


def test_each_repeat_is_a_group_and_names_follow_search_order():
    configs = {f"r{r}-t{i}": cfg(seed=10 + r, **{"optimizer.lr": 0.01 * (i + 1)}) for r in range(3) for i in range(2)}
    groups = group_trials(configs)
    assert [(g.name, g.trials) for g in groups] == [
        ("g0", ("r0-t0", "r0-t1")), ("g1", ("r1-t0", "r1-t1")), ("g2", ("r2-t0", "r2-t1"))]


@pytest.mark.parametrize("change, reason", [
    ({"search.share_preprocessing": False}, "search.share_preprocessing is false"),
    ({"echo.stage": "before_augment"}, "echoes in the preprocessing actor"),  # copies need the CPU augmentation
    ({"echo.factor": "auto"}, "by its own upstream rate"),
    ({"echo.stage": "batch", "echo.factor": "auto"}, "by its own upstream rate"),
])
def test_trials_that_cannot_share_keep_their_own_stream(change, reason):
    groups = group_trials({"r0-t0": cfg(), "r0-t1": cfg(**change), "r0-t2": cfg()})
    assert [(g.name, g.trials, g.shared) for g in groups] == [
        ("g0", ("r0-t0", "r0-t2"), True), ("g1", ("r0-t1",), False)]
    assert reason in groups[1].reason and groups[1].reason in groups[1].describe()
    assert groups[0].describe() == f"shared stream; upstream key {groups[0].key}; trials r0-t0,r0-t2"


def test_ray_train_trials_keep_their_own_streams():
    groups = group_trials({"r0-t0": cfg(), "r0-t1": cfg()}, warm=False)
    assert [(g.trials, g.shared) for g in groups] == [(("r0-t0",), False), (("r0-t1",), False)]
    assert all("Ray Train fit" in g.reason for g in groups)


def test_auto_without_echo_can_share():
    assert group_trials({"a": cfg(**{"echo.stage": "none", "echo.factor": "auto"})})[0].shared


def test_window_and_epochs_of_a_stream():
    members = [cfg(), cfg(**{"train.batch_size": 400, "echo.shuffle_buffer": 100, "train.max_epochs": 2})]
    assert window_rows([cfg()]) == max(8 * 128, 2 * 512) == 1024
    assert window_rows(members) == 2 * 800  # shuffle_buffer_rows: at least two batches
    # every member's epochs, the window in epochs (rounded up) and one a late start straddles
    assert stream_epochs(members, 1600, 1000) == 4 + 2 + 2 + 1
    assert stream_epochs(members, 1000, 1000) == 4 + 2 + 1 + 1


@pytest.mark.parametrize("per_trial, per_producer, total, max_c, groups, expected", [
    ({"CPU": 0.5}, {"CPU": 0.5}, {"CPU": 2.0}, 4, 1, 3),  # 3 x 0.5 + 1 producer = 2.0
    ({"CPU": 0.5}, {"CPU": 0.5}, {"CPU": 2.0}, 2, 1, 2),
    ({"CPU": 0.5}, {"CPU": 0.5}, {"CPU": 2.0}, 4, 5, 2),  # 2 running trials, 2 producers
    ({"CPU": 1.0}, {"CPU": 1.0}, {"CPU": 2.0}, 4, 3, 1),
    ({"CPU": 1.0}, {"CPU": 1.5}, {"CPU": 2.0}, 4, 1, 0),  # not even one
    ({"CPU": 0.5}, {"CPU": 0.5, "ssd": 1.0}, {"CPU": 8.0, "ssd": 1.0}, 4, 2, 1),  # two producers need 2 ssd
    ({"CPU": 0.5}, {"CPU": 0.5, "ssd": 1.0}, {"CPU": 8.0, "ssd": 1.0}, 4, 1, 4),
])
def test_fit_concurrency(per_trial, per_producer, total, max_c, groups, expected):
    assert fit_concurrency(per_trial, per_producer, total, max_c, groups) == expected


def test_share_plan_tags_record_every_group():
    groups = group_trials({"r0-t0": cfg(), "r0-t1": cfg(), "r1-t0": cfg(seed=9), "r1-t1": cfg(**{"echo.factor": "auto"})})
    tags = SharePlan(groups).tags()
    assert tags == {
        "echoray.share_group.g0": f"shared stream; upstream key {groups[0].key}; trials r0-t0,r0-t1",
        "echoray.share_group.g1": f"shared stream; upstream key {groups[1].key}; trials r1-t0",
        "echoray.share_group.g2": groups[2].describe(),
        "echoray.share_preprocessing": "2 shared stream(s) for 3 trial(s)",
    }
    assert tags["echoray.share_group.g2"].startswith("private stream (echo.stage after_augment at factor auto")


@pytest.mark.parametrize("stage, factor, on, ops, at_consumption", [
    ("after_augment", 2.0, "cpu", True, True),
    ("after_augment", 1.5, "worker", False, True),
    ("before_augment", 2.0, "worker", True, True),
    ("before_augment", 2.0, "cpu", False, True),  # nothing to augment: the worker can copy
    ("none", 1.0, "cpu", True, False),
    ("batch", 2.0, "cpu", True, False),
])
def test_a_shared_stream_is_echoed_by_the_consumer(stage, factor, on, ops, at_consumption):
    c = PipelineConfig.model_validate({
        "echo": {"stage": stage, "factor": factor},
        "preprocess": {"augment": {"on": on, "ops": [{"op": "random_crop", "padding": 2}] if ops else []}}})
    plan = EchoPlan.from_config(c, shared_stream=True)
    assert plan.shareable and plan.shared_stream
    assert plan.at_consumption is at_consumption
    assert not plan.in_actor and plan.actor_factor == 1.0  # the producer never echoes
    assert plan.on_batches is (stage == "batch")
    assert plan.epochs_by_fresh is False  # a fixed factor: epochs by steps, as a private stream's
    private = EchoPlan.from_config(c)
    assert not private.shared_stream and private.shareable
    assert private.in_actor is (stage in ("before_augment", "after_augment"))


def test_a_plan_that_needs_the_actor_refuses_a_shared_stream():
    c = PipelineConfig.model_validate({"echo": {"stage": "before_augment", "factor": 2.0}})
    assert not EchoPlan.from_config(c).shareable
    with pytest.raises(ValueError, match="echoes in the preprocessing actor: a shared stream cannot feed it"):
        EchoPlan.from_config(c, shared_stream=True)
    auto = PipelineConfig.model_validate({"echo": {"stage": "after_augment", "factor": "auto"}})
    assert not EchoPlan.from_config(auto).shareable
