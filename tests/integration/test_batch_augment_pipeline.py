"""Batch augmentation on a local Ray, checked from the audit: local views, grouped workers."""

from collections import defaultdict

from mlflow.tracking import MlflowClient
from test_train_pipeline import assert_final_model

from echoray.config_load import load_config
from echoray.data.sources import index_source

BASE = ["train.target=null", "audit.enabled=true", "source.limit=128", "train.batch_size=16",
        "preprocess.augment.on=worker", "preprocess.augment.ops=[{op: random_crop, padding: 2}, {op: flip}]"]
# One worker trained in the test's process, as `echoray train` trains on a local Ray it
# started: the same worker loop makes the views (test_warm_trials: the same audit rows as a
# Ray Train run), ~10 s less per run. Grouped mode trains in a Ray Train worker group.
IN_PROCESS = "scaling.local_mode=true"


def by(t, *cols):
    return zip(*(t[c] for c in cols), strict=True)


def test_local_mode_every_step_holds_m_views_of_b_samples(run_pipeline):
    summary, audit = run_pipeline(None, *BASE, IN_PROCESS, "train.max_epochs=1",
                                  "batch_augmentation.copies=3", name="ba_local")
    t = audit.to_pydict()
    steps = defaultdict(lambda: defaultdict(list))
    order = defaultdict(list)  # step -> sample ids in row order
    for step, sid, view, key in by(t, "step", "sample_id", "ba_view", "aug_key"):
        steps[step][sid].append((view, key))
        order[step].append(sid)
    assert len(steps) == 8  # 128 samples / B = 16
    for sids in order.values():  # view-major rows: any B consecutive rows are B distinct samples
        assert all(len(set(sids[i : i + 16])) == 16 for i in range(0, 48, 16))
    for per_sample in steps.values():
        assert len(per_sample) == 16
        for views in per_sample.values():
            assert sorted(v for v, _ in views) == [0, 1, 2]
            assert len({k for _, k in views}) == 3
    assert summary["fresh_examples"] == 128 and summary["trained_examples"] == 384
    assert summary["batch_augmentation"] == {"copies": 3, "mode": "local", "views_per_sample": 3.0,
                                             "views_per_step": 48.0, "samples_per_step": 16.0}
    assert summary["echo"]["measured_factor"] == 1.0 and summary["trained_samples"] == 128


def test_grouped_mode_four_workers_two_groups(run_pipeline, sqlite_uri):
    overrides = [*BASE, "train.max_epochs=2", "batch_augmentation.copies=2", "batch_augmentation.mode=grouped",
                 "scaling.num_workers=4", "scaling.cpus_per_worker=0.25"]
    summary, audit = run_pipeline(None, *overrides, name="ba_grouped")
    t = audit.to_pydict()
    seq = defaultdict(list)  # worker -> [(step, sample_id)] in order
    views = defaultdict(list)  # (group, step, sample) -> (worker, ba_view, aug key) over the group
    for w, g, step, sid, view, key in by(t, "worker", "group", "step", "sample_id", "ba_view", "aug_key"):
        seq[w].append((step, sid))
        views[(g, step, sid)].append((w, view, key))
    assert sorted(seq) == [0, 1, 2, 3]
    assert seq[0] == seq[1] and seq[2] == seq[3]  # same samples, same order within a group
    assert all(len(set(s)) == len(s) for s in seq.values())  # no worker holds two views of one sample
    assert len(seq[0]) == 2 * 64  # each member: B rows per step, one view of each, 2 epochs x 64 samples
    ids = {g: defaultdict(set) for g in (0, 1)}
    for g, ep, sid in by(t, "group", "epoch", "sample_id"):
        ids[g][ep].add(sid)
    train_ids = set(index_source(load_config(None, BASE).source).train_ids.tolist())
    for ep in (0, 1):
        assert not ids[0][ep] & ids[1][ep]  # disjoint across groups
        assert ids[0][ep] | ids[1][ep] == train_ids
    for (g, _, _), vs in views.items():  # member m makes view m with its own key: M views per group
        assert sorted((w, v) for w, v, _ in vs) == [(2 * g, 0), (2 * g + 1, 1)]
        assert len({k for _, _, k in vs}) == 2
    # each sample read once per group per epoch: fresh counts reads, not views or members
    assert summary["fresh_examples"] == summary["trained_samples"] == 2 * 128
    assert summary["trained_examples"] == 2 * 128 * 2  # epochs x samples x M views (one per member)
    assert summary["echo"]["measured_factor"] == 1.0
    assert summary["batch_augmentation"]["views_per_sample"] == 2.0
    assert summary["batch_augmentation"]["views_per_step"] == 4 * 16  # W/M groups x M members x B
    assert summary["epochs"] == summary["evaluations"] == 2 and summary["steps"] == 2 * 64 // 16  # a pass of the shards
    assert summary["workers"] == 4
    assert_final_model(MlflowClient(sqlite_uri), summary["mlflow_run_id"], 2)  # rank 0's, out of DDP


def test_same_seed_same_losses(run_pipeline):
    # both runs in this one process: the second must not inherit anything of the first
    overrides = [*BASE, IN_PROCESS, "train.max_epochs=3", "batch_augmentation.copies=2",
                 "echo.stage=before_augment", "echo.factor=1.5", "model.dropout=0.2"]
    a, _ = run_pipeline(None, *overrides, name="det_a")
    b, _ = run_pipeline(None, *overrides, name="det_b")
    assert [h["loss"] for h in a["history"]] == [h["loss"] for h in b["history"]]
    assert a["fresh_examples"] == b["fresh_examples"] and a["trained_examples"] == b["trained_examples"]


def test_test_time_augmentation_is_reported(run_pipeline):
    overrides = [*BASE, IN_PROCESS, "train.max_epochs=2", "batch_augmentation.tta_views=4",
                 "model.ghost_batch_size=8"]
    summary, _ = run_pipeline(None, *overrides, name="tta")
    n_eval = len(index_source(load_config(None, overrides).source).eval_ids)
    # one TTA accuracy per evaluation, a count of correct held-out images over all of them
    assert len(summary["history"]) == 2
    for h in summary["history"]:
        correct = round(h["accuracy_tta"] * n_eval)
        assert 0 <= correct <= n_eval and h["accuracy_tta"] == correct / n_eval
    assert summary["metric_tta"] == summary["history"][-1]["accuracy_tta"]
