"""The echo plan (echoray/echo_plan.py) against the rules the stage comparisons it
replaced implemented (train/loop.py, data/pipeline.py, train/local_run.py,
train/consumption_echo.py echoes_on_worker, config.py), for every echo.stage x
echo.factor (fixed, fractional, auto) x preprocess.augment.on x with/without ops."""

import ast
from pathlib import Path

import pytest

from echoray.config import PipelineConfig
from echoray.data.preprocess_args import preprocess_args
from echoray.echo_plan import (
    EchoPlan,
    echoes_batches,
    echoes_examples,
    shuffle_buffer_rows,
    stream_buffer_rows,
)

# site: who echoes. actor_before / actor_after: the preprocessing actor, before / after
# augmenting; consumption: the reading worker as it takes rows (auto); batches: the worker
# repeats batches; none. actor_factor: the factor the actor is given. per_copy: each copy
# its own augmentation key.
# (stage, factor, augment.on, ops, site, actor_factor, per_copy)
TABLE = [
    ("none", 2.0, "cpu", "ops", "none", 1.0, False),
    ("none", 2.0, "cpu", "no ops", "none", 1.0, False),
    ("none", 2.0, "worker", "ops", "none", 1.0, False),
    ("none", 2.0, "worker", "no ops", "none", 1.0, False),
    ("none", 1.5, "cpu", "ops", "none", 1.0, False),
    ("none", 1.5, "cpu", "no ops", "none", 1.0, False),
    ("none", 1.5, "worker", "ops", "none", 1.0, False),
    ("none", 1.5, "worker", "no ops", "none", 1.0, False),
    ("none", "auto", "cpu", "ops", "none", 1.0, False),
    ("none", "auto", "cpu", "no ops", "none", 1.0, False),
    ("none", "auto", "worker", "ops", "none", 1.0, False),
    ("none", "auto", "worker", "no ops", "none", 1.0, False),
    ("before_augment", 2.0, "cpu", "ops", "actor_before", 2.0, True),
    ("before_augment", 2.0, "cpu", "no ops", "actor_before", 2.0, True),
    ("before_augment", 2.0, "worker", "ops", "actor_before", 2.0, True),
    ("before_augment", 2.0, "worker", "no ops", "actor_before", 2.0, True),
    ("before_augment", 1.5, "cpu", "ops", "actor_before", 1.5, True),
    ("before_augment", 1.5, "cpu", "no ops", "actor_before", 1.5, True),
    ("before_augment", 1.5, "worker", "ops", "actor_before", 1.5, True),
    ("before_augment", 1.5, "worker", "no ops", "actor_before", 1.5, True),
    ("before_augment", "auto", "cpu", "ops", "actor_before", "auto", True),
    ("before_augment", "auto", "cpu", "no ops", "consumption", 1.0, True),
    ("before_augment", "auto", "worker", "ops", "consumption", 1.0, True),
    ("before_augment", "auto", "worker", "no ops", "consumption", 1.0, True),
    ("after_augment", 2.0, "cpu", "ops", "actor_after", 2.0, False),
    ("after_augment", 2.0, "cpu", "no ops", "actor_after", 2.0, False),
    ("after_augment", 2.0, "worker", "ops", "actor_after", 2.0, False),
    ("after_augment", 2.0, "worker", "no ops", "actor_after", 2.0, False),
    ("after_augment", 1.5, "cpu", "ops", "actor_after", 1.5, False),
    ("after_augment", 1.5, "cpu", "no ops", "actor_after", 1.5, False),
    ("after_augment", 1.5, "worker", "ops", "actor_after", 1.5, False),
    ("after_augment", 1.5, "worker", "no ops", "actor_after", 1.5, False),
    ("after_augment", "auto", "cpu", "ops", "consumption", 1.0, False),
    ("after_augment", "auto", "cpu", "no ops", "consumption", 1.0, False),
    ("after_augment", "auto", "worker", "ops", "consumption", 1.0, False),
    ("after_augment", "auto", "worker", "no ops", "consumption", 1.0, False),
    ("batch", 2.0, "cpu", "ops", "batches", 1.0, False),
    ("batch", 2.0, "cpu", "no ops", "batches", 1.0, False),
    ("batch", 2.0, "worker", "ops", "batches", 1.0, False),
    ("batch", 2.0, "worker", "no ops", "batches", 1.0, False),
    ("batch", 1.5, "cpu", "ops", "batches", 1.0, False),
    ("batch", 1.5, "cpu", "no ops", "batches", 1.0, False),
    ("batch", 1.5, "worker", "ops", "batches", 1.0, False),
    ("batch", 1.5, "worker", "no ops", "batches", 1.0, False),
    ("batch", "auto", "cpu", "ops", "batches", 1.0, False),
    ("batch", "auto", "cpu", "no ops", "batches", 1.0, False),
    ("batch", "auto", "worker", "ops", "batches", 1.0, False),
    ("batch", "auto", "worker", "no ops", "batches", 1.0, False),
]
OPS = [{"op": "random_crop", "padding": 2}]


def config(stage, factor, on, ops) -> PipelineConfig:
    return PipelineConfig.model_validate({
        "echo": {"stage": stage, "factor": factor},
        "preprocess": {"augment": {"on": on, "ops": OPS if ops == "ops" else []}},
    })


def test_the_table_covers_every_combination():
    combos = {row[:4] for row in TABLE}
    assert len(combos) == len(TABLE) == 4 * 3 * 2 * 2


@pytest.mark.parametrize("stage, factor, on, ops, site, actor_factor, per_copy", TABLE)
def test_plan_attributes(stage, factor, on, ops, site, actor_factor, per_copy):
    plan = EchoPlan.from_config(config(stage, factor, on, ops))
    examples = stage in ("before_augment", "after_augment")
    assert (plan.stage, plan.factor) == (stage, factor)
    assert plan.examples is examples
    assert plan.on_batches is (site == "batches")
    assert plan.at_consumption is (site == "consumption")
    assert plan.in_actor_before_augment is (site == "actor_before")
    assert plan.in_actor_after_augment is (site == "actor_after")
    assert plan.in_actor is (site in ("actor_before", "actor_after"))
    assert plan.actor_factor == actor_factor and type(plan.actor_factor) is type(actor_factor)
    assert plan.per_copy_augment is per_copy
    assert plan.separate_copies is examples  # every example echo repacks its batches
    assert plan.fills_waits is (site == "consumption")  # auto at consumption only


@pytest.mark.parametrize("stage, factor, on, ops, site, actor_factor, per_copy", TABLE)
def test_actor_record_follows_the_plan(stage, factor, on, ops, site, actor_factor, per_copy):
    cfg = config(stage, factor, on, ops)
    args = preprocess_args(cfg, idx=None, collector="c", consumed={})
    assert (args.echo_before_augment, args.echo_after_augment) == (site == "actor_before", site == "actor_after")
    assert args.echo_factor == actor_factor
    assert args.ops == (cfg.preprocess.augment.ops if on == "cpu" else None)
    assert (args.chunk_size, args.seed) == (cfg.source.chunk_size, cfg.seed)
    assert (args.collector, args.consumed) == ("c", None)  # an empty log is no log


def test_stage_rules():
    assert [echoes_examples(s) for s in ("none", "before_augment", "after_augment", "batch")] == \
        [False, True, True, False]
    assert [echoes_batches(s) for s in ("none", "before_augment", "after_augment", "batch")] == \
        [False, False, False, True]


def test_the_validator_uses_the_plan_rule():
    grouped = {"batch_augmentation": {"copies": 2, "mode": "grouped"}, "scaling": {"num_workers": 2}}
    on_worker = {"augment": {"on": "worker"}}
    with pytest.raises(ValueError, match="decided on the reading worker"):
        PipelineConfig.model_validate({**grouped, "preprocess": on_worker,
                                       "echo": {"stage": "after_augment", "factor": "auto"}})
    for echo in ({"stage": "batch", "factor": "auto"}, {"stage": "after_augment", "factor": 2.0}):
        PipelineConfig.model_validate({**grouped, "preprocess": on_worker, "echo": echo})


@pytest.mark.parametrize("buffer, batch, rows", [(0, 64, None), (512, 64, 512), (100, 64, 128), (512, 300, 600)])
def test_shuffle_buffer_rows(buffer, batch, rows):
    cfg = PipelineConfig.model_validate({"echo": {"shuffle_buffer": buffer}, "train": {"batch_size": batch}})
    assert shuffle_buffer_rows(cfg) == rows


def test_data_never_imports_train():
    data = Path(__file__).resolve().parents[2] / "platform" / "echoray" / "data"
    imported = set()
    for f in data.rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add((f.name, node.module))
            elif isinstance(node, ast.Import):
                imported.update((f.name, a.name) for a in node.names)
    assert not [(f, m) for f, m in imported if m == "echoray.train" or m.startswith("echoray.train.")]
    assert ("pipeline.py", "echoray.echo_plan") in imported  # the walk sees data/'s imports


@pytest.mark.parametrize(("stage", "factor", "schedule_factor", "steps"), [
    # 1,000 examples, batch 32, 2 readers: 15 fresh steps per epoch at e = 1
    ("none", 1.0, 1.0, 15),
    ("before_augment", 2.0, 2.0, 31),  # floor(1000 * 2 / 64): the epoch's 2,000 rows
    ("after_augment", 1.5, 1.5, 23),   # floor(1500 / 64)
    ("batch", 1.7, 1.7, 26),           # round(15 * 1.7): each fresh batch repeated
    ("before_augment", "auto", 1.0, 15),  # auto: counted at e = 1 (not known ahead)
    ("batch", "auto", 1.0, 15),
])
def test_steps_per_epoch_are_counted_at_the_schedule_factor(stage, factor, schedule_factor, steps):
    plan = EchoPlan.from_config(PipelineConfig.model_validate(
        {"echo": {"stage": stage, "factor": factor}, "preprocess": {"augment": {"on": "worker"}}}))
    assert plan.schedule_factor == schedule_factor
    assert plan.steps_per_shard_epoch(32, 1000, 2) == steps
    assert plan.steps_per_shard_epoch(32, 1000, 2, factor=1.0) == 15  # the fewest an epoch can take


def test_a_blocks_rows_are_the_split_over_its_chunks():
    """A block's rows (first_block_count's unit): a text chunk is a read unit of many
    sequences, an image chunk source.chunk_size ids (the last one short)."""
    from types import SimpleNamespace

    import numpy as np

    from echoray.data.pipeline import block_rows

    text = SimpleNamespace(train_ids=np.arange(36542))  # 179 read units
    assert block_rows(text, 179, 2) == 2 * 205
    images = SimpleNamespace(train_ids=np.arange(1000))  # 32 ids a chunk: 32 chunks
    assert block_rows(images, 32, 4) == 4 * 32


def with_echo(cfg: PipelineConfig, **echo) -> PipelineConfig:
    return cfg.model_copy(update={"echo": cfg.echo.model_copy(update=echo)})


@pytest.mark.parametrize("stage, factor, on, ops", [row[:4] for row in TABLE])
def test_the_stream_shuffle_holds_fresh_rows_over_autos_start_factor(stage, factor, on, ops):
    """Under auto at consumption the stream's shuffle holds the pool's rows over the start
    factor (the cap), at least two batches; everywhere else it is the pool's size."""
    cfg = config(stage, factor, on, ops)  # 512-row buffer, batch 64, cap 8
    if EchoPlan.from_config(cfg).at_consumption and factor == "auto":
        assert stream_buffer_rows(cfg) == 128  # max(2 x 64, 512 / 8)
        assert stream_buffer_rows(with_echo(cfg, max_factor=2.0)) == 256
        assert stream_buffer_rows(with_echo(cfg, max_factor=1.0)) == 512
        assert stream_buffer_rows(with_echo(cfg, max_factor=3.0)) == 171  # ceil(512 / 3)
    else:
        assert stream_buffer_rows(cfg) == shuffle_buffer_rows(cfg) == 512
    assert stream_buffer_rows(with_echo(cfg, shuffle_buffer=0)) is None


def test_autos_first_batch_waits_for_its_stream_shuffle_only():
    """first_block_count reads the stream's shuffle: under auto at the cap a quarter of the
    one-call blocks that the pool's size would ask for (128 rows, not 512)."""
    from echoray.data.pipeline import first_block_count

    auto = config("after_augment", "auto", "cpu", "ops")
    assert first_block_count(auto, 32) == 128 // 32 == 4
    assert first_block_count(with_echo(auto, max_factor=1.0), 32) == 512 // 32 == 16


def test_the_first_one_call_blocks_cover_every_workers_first_batch():
    """A map task's rows reach the stream when it ends, so the plan starts with one-call
    blocks: two per actor, and where workers keep a shuffle buffer as many as their first
    batches need (the rows each worker's buffer holds first, data/shuffle_buffer.py), at
    most 64."""
    from echoray.data.pipeline import MAX_FIRST_BLOCKS, first_block_count
    from echoray.data.shuffle_buffer import rows_before_first_batch

    digits = PipelineConfig.model_validate({})  # the embedded default: 512-row buffer, batch 64, 1 actor
    assert rows_before_first_batch(512, 64) == 512 and rows_before_first_batch(16, 64) == 64
    assert rows_before_first_batch(None, 64) == 64
    assert first_block_count(digits, 128) == 512 // 128 == 4
    assert first_block_count(digits, 100) == 6  # ceil(512 / 100)
    assert first_block_count(digits, 4096) == 2  # one call fills it: two per actor still
    no_shuffle = digits.model_copy(update={"echo": digits.echo.model_copy(update={"shuffle_buffer": 0})})
    assert first_block_count(no_shuffle, 16) == 2  # no buffer to fill: two per actor, as before
    two = digits.model_copy(update={"scaling": digits.scaling.model_copy(update={"num_workers": 2})})
    assert first_block_count(two, 128) == 2 * 512 // 128 == 8
    assert first_block_count(digits, 1) == MAX_FIRST_BLOCKS
