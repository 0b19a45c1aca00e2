"""Batch augmentation on a local Ray, checked from the audit: local views, grouped workers."""

from collections import defaultdict

from echoray.config_load import load_config
from echoray.data.sources import index_source

BASE = ["train.target=null", "audit.enabled=true", "source.limit=128", "train.batch_size=16",
        "preprocess.augment.on=worker", "preprocess.augment.ops=[{op: random_crop, padding: 2}, {op: flip}]"]


def by(t, *cols):
    return zip(*(t[c] for c in cols), strict=True)


def test_local_mode_every_step_holds_m_views_of_b_samples(run_pipeline):
    summary, audit = run_pipeline(None, *BASE, "train.max_epochs=1", "batch_augmentation.copies=3",
                                  name="ba_local")
    t = audit.to_pydict()
    steps = defaultdict(lambda: defaultdict(list))
    for step, sid, view, key in by(t, "step", "sample_id", "ba_view", "aug_key"):
        steps[step][sid].append((view, key))
    assert len(steps) == 8  # 128 samples / B = 16
    for per_sample in steps.values():
        assert len(per_sample) == 16
        for views in per_sample.values():
            assert sorted(v for v, _ in views) == [0, 1, 2]
            assert len({k for _, k in views}) == 3
    assert summary["fresh_examples"] == 128 and summary["trained_examples"] == 384
    assert summary["batch_augmentation"] == {"copies": 3, "mode": "local"}
    assert summary["echo"]["measured_factor"] == 1.0


def test_grouped_mode_four_workers_two_groups(run_pipeline):
    overrides = [*BASE, "train.max_epochs=2", "batch_augmentation.copies=2", "batch_augmentation.mode=grouped",
                 "scaling.num_workers=4", "scaling.cpus_per_worker=0.25"]
    summary, audit = run_pipeline(None, *overrides, name="ba_grouped")
    t = audit.to_pydict()
    seq = defaultdict(list)  # worker -> [(step, sample_id)] in order, view 0 only
    keys = defaultdict(set)  # (group, step, sample, view) -> aug keys across members
    for w, g, step, sid, view, key in by(t, "worker", "group", "step", "sample_id", "ba_view", "aug_key"):
        if view == 0:
            seq[w].append((step, sid))
        keys[(g, step, sid, view)].add(key)
    assert sorted(seq) == [0, 1, 2, 3]
    assert seq[0] == seq[1] and seq[2] == seq[3]  # same samples, same order within a group
    ids = {g: defaultdict(set) for g in (0, 1)}
    for g, ep, sid in by(t, "group", "epoch", "sample_id"):
        ids[g][ep].add(sid)
    train_ids = set(index_source(load_config(None, BASE).source).train_ids.tolist())
    for ep in (0, 1):
        assert not ids[0][ep] & ids[1][ep]  # disjoint across groups
        assert ids[0][ep] | ids[1][ep] == train_ids
    assert {len(v) for v in keys.values()} == {2}  # the two members never share an augmentation
    # each sample read once per group per epoch: fresh counts reads, not views or members
    assert summary["fresh_examples"] == 2 * 128
    assert summary["trained_examples"] == 2 * 128 * 2 * 2  # epochs x samples x members x views
    assert summary["workers"] == 4


def test_same_seed_same_losses(run_pipeline):
    overrides = [*BASE, "train.max_epochs=3", "batch_augmentation.copies=2", "echo.stage=before_augment",
                 "echo.factor=1.5", "model.dropout=0.2"]
    a, _ = run_pipeline(None, *overrides, name="det_a")
    b, _ = run_pipeline(None, *overrides, name="det_b")
    assert [h["loss"] for h in a["history"]] == [h["loss"] for h in b["history"]]
    assert a["fresh_examples"] == b["fresh_examples"] and a["trained_examples"] == b["trained_examples"]


def test_test_time_augmentation_is_reported(run_pipeline):
    summary, _ = run_pipeline(None, *BASE, "train.max_epochs=2", "batch_augmentation.tta_views=4",
                              "model.ghost_batch_size=8", name="tta")
    assert all(0.0 <= h["accuracy_tta"] <= 1.0 for h in summary["history"])
    assert summary["metric_tta"] == summary["history"][-1]["accuracy_tta"]
