"""Whole pipelines on a local Ray: exact accounting from the audit, MLflow rows."""

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from echoray.config_load import flatten, load_config
from echoray.data.fixtures import decode_id, write_cifar10_bin
from echoray.data.sources import index_source

SMALL = ["train.max_epochs=3", "train.target=null", "audit.enabled=true", "train.batch_size=32"]
# Trained in the test's own process, as `echoray train` trains a one-worker run on a local
# Ray it started. What these tests check (what a source reads, the stop at the target, the
# counts) is the same stream and worker loop either way (test_warm_trials: the same audit
# rows as a Ray Train run), and a Ray Train worker group cost each run ~10 s more. The Ray
# Train path has its own: test_digits_end_to_end_exact_counts_and_mlflow, test_echo_pipeline,
# test_batch_augment_pipeline, test_bad_data, test_worker_failure, test_driver_resume.
IN_PROCESS = "scaling.local_mode=true"

SUMMARY_KEYS = {
    "pipeline", "run_dir", "mlflow_run_id", "mlflow_tracking_uri", "echo", "batch_augmentation",
    "workers", "epochs", "steps", "fresh_examples", "trained_examples", "metric", "target_reached",
    "fresh_examples_to_target", "steps_to_target", "time_to_target_s", "wall_s",
    "upstream_examples_per_s", "downstream_examples_per_s", "measured_R",
    "train_loop_s", "eval_s", "input_wait_s", "step_s",
}


def assert_each_epoch_reads_every_train_id_once(audit, train_ids, epochs):
    t = audit.to_pydict()
    for e in range(epochs):
        ids = [s for s, ep in zip(t["sample_id"], t["epoch"], strict=True) if ep == e]
        assert sorted(ids) == sorted(np.asarray(train_ids).tolist()), f"epoch {e}"


def test_digits_end_to_end_exact_counts_and_mlflow(run_pipeline, sqlite_uri, monkeypatch):
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "1")  # MLflow's own knob (default 10 s)
    # the model is the weights the run ended with, whatever its checkpoints
    overrides = [*SMALL, "source.limit=320"]
    summary, audit = run_pipeline(None, *overrides)
    assert SUMMARY_KEYS <= set(summary)
    assert 0 < summary["input_wait_s"] + summary["step_s"] + summary["eval_s"] <= summary["train_loop_s"]
    # 320 ids, batch 32: 10 steps per epoch, 3 epochs, everything consumed exactly once per epoch.
    assert summary["steps"] == 30 and summary["epochs"] == 3 and summary["evaluations"] == 3
    assert summary["fresh_examples"] == summary["trained_examples"] == 960 == audit.num_rows
    echo = summary["echo"]
    assert (echo["stage"], echo["factor"], echo["measured_factor"], echo["final_factor"]) == ("none", 1.0, 1.0, 1.0)
    assert echo["factor_history"] == [] and [h["evaluation"] for h in summary["history"]] == [1, 2, 3]
    assert [(h["epoch"], h["step"]) for h in summary["history"]] == [(1, 10), (2, 20), (3, 30)]
    assert summary["target_reached"] is False and summary["fresh_examples_to_target"] is None
    idx = index_source(load_config(None, overrides).source)
    assert_each_epoch_reads_every_train_id_once(audit, idx.train_ids, 3)
    steps = Counter(audit.column("step").to_pylist())
    assert sorted(steps) == list(range(30)) and set(steps.values()) == {32}
    assert set(audit.column("view").to_pylist()) == {0}
    # augmentation keys differ per (epoch, sample): 960 distinct
    assert len(set(audit.column("aug_key").to_pylist())) == 960

    run_dir = Path(summary["run_dir"])
    assert json.loads((run_dir / "summary.json").read_text()) == json.loads(json.dumps(summary))
    client = MlflowClient(sqlite_uri)
    run = client.get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    cfg = load_config(None, [f"tracking.uri={sqlite_uri}", *overrides])
    assert run.data.params == flatten(cfg)
    history = client.get_metric_history(run.info.run_id, "accuracy")
    assert [m.step for m in history] == [10, 20, 30]  # MLflow's step: optimizer steps (docs/concepts.md)
    fresh = client.get_metric_history(run.info.run_id, "fresh_examples")
    assert [m.value for m in fresh][:3] == [320, 640, 960]
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "epoch")] == [
        (10, 1.0), (20, 2.0), (30, 3.0)]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"summary.json", "config.yaml", "audit.parquet"} <= artifacts
    assert_run_page(client, run, idx, summary)


def assert_final_model(client, run_id: str, epochs: float):
    """The run logged one model, tagged with the epoch it ended at (passes of fresh data,
    summary.json's `epochs`; tracking_model.py: rank 0's final weights)."""
    (logged,) = client.get_run(run_id).outputs.model_outputs
    assert float(client.get_logged_model(logged.model_id).tags["echoray.epoch"]) == epochs


def assert_run_page(client, run, idx, summary):
    """What the MLflow run page shows beside the metrics: the two dataset inputs, the model
    (it loads without echoray's classes and scores the held-out split as the run's last
    evaluation did), MLflow's system metrics."""
    import mlflow.pytorch
    import torch

    from echoray.data.sources import open_reader

    inputs = {i.tags[0].value: i.dataset for i in run.inputs.dataset_inputs}
    assert set(inputs) == {"training", "evaluation"}
    assert json.loads(inputs["training"].profile)["num_rows"] == len(idx.train_ids) == 320
    assert json.loads(inputs["evaluation"].profile)["num_rows"] == len(idx.eval_ids)
    assert_final_model(client, run.info.run_id, summary["epochs"])
    (logged,) = run.outputs.model_outputs
    model = mlflow.pytorch.load_model(f"models:/{logged.model_id}")
    images, labels = open_reader(idx).read(idx.eval_ids, "eval")
    with torch.no_grad():
        logits = model(torch.from_numpy(images))
    assert tuple(logits.shape) == (len(idx.eval_ids), 10)
    accuracy = (logits.argmax(1).numpy() == labels).mean()
    assert accuracy == pytest.approx(summary["history"][-1]["accuracy"], abs=1e-9)
    assert client.get_metric_history(run.info.run_id, "system/cpu_utilization_percentage")


def test_digits_reaches_a_modest_target_and_stops(run_pipeline, sqlite_uri):
    summary, _ = run_pipeline(None, "train.target=0.5", "train.max_epochs=10", "source.limit=640", IN_PROCESS,
                              "train.checkpoint_every=0")
    assert summary["target_reached"] is True and summary["stop_reason"] == "target reached"
    assert summary["metric"]["value"] >= 0.5
    assert summary["evaluations"] < 10 and summary["epochs"] == summary["evaluations"]  # 640 ids, batch 64
    assert summary["fresh_examples_to_target"] == summary["fresh_examples"] == 640 * summary["evaluations"]
    assert summary["steps_to_target"] == summary["steps"] and summary["time_to_target_s"] > 0
    # no checkpoint kept (train.checkpoint_every: 0), stopped at the target: the model logged
    # is the weights of the epoch that reached it
    assert_final_model(MlflowClient(sqlite_uri), summary["mlflow_run_id"], summary["epochs"])


@pytest.mark.parametrize("where", ["local", "s3"])
@pytest.mark.parametrize("kind", ["cifar10", "image_folder", "parquet", "idx"])
def test_each_source_format_runs_the_whole_pipeline(run_pipeline, s3_data, kind, where):
    """The same files on local disk and in the tests' S3 bucket (s3://echoray-data/<kind>):
    the Ray Data actors read the bucket through the AWS variables the local Ray inherited."""
    path = s3_data[kind][0 if where == "local" else 1]
    overrides = [*SMALL, IN_PROCESS, f"source.kind={kind}", f"source.path={path}", "source.image_size=32",
                 "source.chunk_size=16", "preprocess.augment.ops=[{op: random_crop, padding: 4}, {op: flip}]"]
    summary, audit = run_pipeline(None, *overrides, name=f"{kind}-{where}")
    idx = index_source(load_config(None, overrides).source)
    assert_each_epoch_reads_every_train_id_once(audit, idx.train_ids, 3)
    n = len(idx.train_ids)
    assert summary["fresh_examples"] == audit.num_rows == (n // 32) * 32 * 3


def test_pipeline_reads_the_right_pixels_for_each_sample_id(local_ray, tmp_path):
    """The Ray Data stream itself: ids, labels and decoded pixels agree."""
    from echoray.data.pipeline import build_train_dataset

    path = write_cifar10_bin(tmp_path, per_batch=20, batches=5, test=10)
    cfg = load_config(None, ["source.kind=cifar10", f"source.path={path}", "source.image_size=32",
                             "source.chunk_size=8", "preprocess.augment.ops=[]", "train.max_epochs=2"])
    idx = index_source(cfg.source)
    rows = build_train_dataset(cfg, idx).take_all()
    assert len(rows) == 200
    for r in rows:
        assert decode_id(r["image"]) == r["sample_id"] and r["label"] == r["sample_id"] % 10
    assert Counter((r["epoch"], r["sample_id"]) for r in rows) == Counter(
        {(e, i): 1 for e in range(2) for i in range(100)})


@pytest.mark.parametrize("floor", [0, None])
def test_each_actor_call_leaves_the_actor_as_its_own_block(local_ray, monkeypatch, floor):
    """A read-plan block of many actor calls reaches the consumer as one block per call,
    not one per task (data/output_blocks.py): digits over 2 epochs, 16-sample chunks, 8
    chunks a call, plan blocks of 45 chunks (the first four of 8: the fill of the worker's
    512-row shuffle buffer, first_block_count): with no floor on a block's size, output blocks = calls
    exactly; with the 1 MiB floor, one block per plan block (a task's 720 rows are 219 KB);
    every row of both epochs exactly once."""
    import math

    from echoray.data import output_blocks
    from echoray.data.pipeline import (
        build_train_dataset,
        first_block_count,
        plan_block_chunks,
    )
    from echoray.data.plan import block_starts

    if floor is not None:
        monkeypatch.setattr(output_blocks, "MIN_BLOCK_BYTES", floor)  # read in this process
    cfg = load_config(None, ["source.chunk_size=16", "train.max_epochs=2", "preprocess.batch_size=128"])
    idx = index_source(cfg.source)
    n_chunks = math.ceil(len(idx.train_ids) / 16)
    planned = 2 * n_chunks
    block = plan_block_chunks(planned, 1)
    n_first = first_block_count(cfg, 8 * 16)
    starts = block_starts(planned, block, 8, n_first)
    sizes = np.diff([*starts, planned])
    calls = int(sum(math.ceil(s / 8) for s in sizes))
    assert block == 45 and n_first == 4 and list(sizes[:5]) == [8] * 4 + [45] and calls > len(sizes)
    ds = build_train_dataset(cfg, idx).materialize()
    assert ds.num_blocks() == (calls if floor == 0 else len(sizes))
    rows = ds.take_all()
    assert Counter((int(r["epoch"]), int(r["sample_id"])) for r in rows) == Counter(
        {(e, int(i)): 1 for e in range(2) for i in idx.train_ids})
