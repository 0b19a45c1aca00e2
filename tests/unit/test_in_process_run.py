"""A run trained in the driver's process: where it is chosen, and the store that keeps its
checkpoints (a local folder here; tests/integration/test_driver_resume.py resumes from
one in the S3 server)."""

import json
from types import SimpleNamespace

import pytest

from echoray.config_load import ConfigError, load_config
from echoray.run import RunHooks, choose_in_process
from echoray.train.checkpoint_store import DIR, INDEX, CheckpointStore


def written(tmp_path, name: str, payload: str):
    d = tmp_path / "local" / name
    (d / "sub").mkdir(parents=True)
    (d / "meta.json").write_text(payload)
    (d / "sub" / "rank_0.json").write_text(payload[::-1])
    return d


def test_store_keeps_the_newest_and_names_them_in_its_index(tmp_path):
    store = CheckpointStore(str(tmp_path / "ray"), keep=2)
    assert store.kept() == [] and store.latest() is None
    for i in range(1, 4):
        local = written(tmp_path, f"w{i}", f'{{"epoch": {i}}}')
        ckpt = store.save({"epoch": i, "steps": 10 * i}, local)
        assert not local.exists()  # the written folder is removed once uploaded
        assert ckpt.path == str(tmp_path / "ray" / DIR / f"checkpoint_{i:06d}")
    index = json.loads((tmp_path / "ray" / DIR / INDEX).read_text())
    assert index == [{"name": "checkpoint_000002", "epoch": 2, "steps": 20},
                     {"name": "checkpoint_000003", "epoch": 3, "steps": 30}]
    assert sorted(p.name for p in (tmp_path / "ray" / DIR).iterdir()) == [
        "checkpoint_000002", "checkpoint_000003", INDEX]  # the oldest deleted, no temporary index left
    with store.latest().as_directory() as d:
        assert json.loads(open(f"{d}/meta.json").read()) == {"epoch": 3}
        assert open(f"{d}/sub/rank_0.json").read() == '}3 :"hcope"{'


def test_store_keeps_all_when_told_and_replaces_a_save_that_never_reached_the_index(tmp_path):
    store = CheckpointStore(str(tmp_path / "ray"), keep=None)
    store.save({"epoch": 1}, written(tmp_path, "w1", "1"))
    stale = tmp_path / "ray" / DIR / "checkpoint_000002"  # a driver killed mid-upload
    stale.mkdir()
    (stale / "half.bin").write_text("x")
    store.save({"epoch": 2}, written(tmp_path, "w2", "2"))
    store.save({"epoch": 3}, written(tmp_path, "w3", "3"))
    assert [k["epoch"] for k in store.kept()] == [1, 2, 3]
    assert sorted(p.name for p in stale.iterdir()) == ["meta.json", "sub"]


def test_a_missing_storage_folder_is_created_by_the_first_save(tmp_path):
    store = CheckpointStore(str(tmp_path / "not" / "yet"), keep=1)
    store.save({"epoch": 1}, written(tmp_path, "w1", "1"))
    assert [k["name"] for k in store.kept()] == ["checkpoint_000001"]


def cfg(*overrides):
    return load_config(None, list(overrides))


@pytest.mark.parametrize("mode, local, expected", [
    ("auto", True, True), ("auto", False, False),  # auto: only on a local Ray this command started
    ("true", False, True), ("true", True, True),
    ("false", True, False), ("false", False, False),
])
def test_where_a_one_cpu_worker_run_trains(mode, local, expected):
    assert choose_in_process(cfg(f"scaling.in_process={mode}"), False, local, RunHooks(), None) is expected


def test_a_run_that_needs_ray_train_never_trains_in_process():
    for other in ("scaling.num_workers=2", "scaling.max_failures=1", "batch_augmentation.mode=grouped"):
        c = cfg(other)
        assert not choose_in_process(c, False, True, RunHooks(), None), other
        assert not choose_in_process(c, False, True, RunHooks(in_process=True), None), other
    assert not choose_in_process(cfg(), True, True, RunHooks(), None)  # a GPU: Ray Train's device setup
    with pytest.raises(ConfigError, match="scaling.in_process: true needs one CPU worker"):
        choose_in_process(cfg("scaling.in_process=true", "scaling.num_workers=2"), False, True, RunHooks(), None)


def test_a_search_trial_asks_for_it_and_a_resumed_run_trains_as_it_started():
    assert choose_in_process(cfg("scaling.in_process=false"), False, False, RunHooks(in_process=True), None)
    for trainer in ("in_process", "ray_train"):
        resume = SimpleNamespace(trainer=trainer)
        for mode in ("auto", "true", "false"):
            got = choose_in_process(cfg(f"scaling.in_process={mode}"), False, True, RunHooks(), resume)
            assert got is (trainer == "in_process"), (trainer, mode)


def test_a_frozen_heap_leaves_the_runs_own_cycles_to_the_collector():
    """_freeze_heap takes what the process held before the run out of the collector's
    scans; a reference cycle the run makes afterwards is still found and freed."""
    import gc
    import weakref

    from echoray.train.in_process import _freeze_heap

    class Node:
        pass

    gc.collect()
    try:
        _freeze_heap()
        frozen = gc.get_freeze_count()
        assert frozen > 0
        after = Node()
        after.me = after
        gone = weakref.ref(after)
        del after
        assert gc.collect() >= 1 and gone() is None  # the run's own cycle: collected
        assert gc.get_freeze_count() == frozen  # the frozen objects were not scanned or moved
    finally:
        gc.unfreeze()
