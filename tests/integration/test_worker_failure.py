"""A train worker killed from outside (SIGKILL by pid, as a crash or the OOM killer would)
with scaling.max_failures=1: the worker group restarts from the last checkpoint and the
run finishes with exactly the counts of an unfailed run. Echo before augmentation at
e = 1.5 leaves samples with copies in flight at every checkpoint: fresh examples must
still be the distinct (epoch, sample) trained, at every epoch (issue 18). The checkpoints
are in the tests' S3 bucket (train.storage_path=s3://...), as on a cluster without a
shared disk, where the new worker may start on another node: it restores from the object
store."""

import json
import os
import signal
import threading
import time
from collections import Counter

import pyarrow.parquet as pq
import ray
from mlflow.tracking import MlflowClient
from ray.train import Result
from ray.util.state import list_actors

from echoray.config_load import load_config
from echoray.recovery.checkpoint import read_meta
from helpers import wait_for

N_TRAIN, BATCH = 1438, 64  # digits


def train_in_background(cfg, out):
    from echoray.run import train

    box = {}

    def target():
        try:
            box["summary"] = train(cfg, "embedded:digits", str(out), time.time())
        except BaseException as exc:  # re-raised by the test
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def logged_epochs(client, run_id):
    return sorted(m.step for m in client.get_metric_history(run_id, "accuracy"))


def train_worker_pid():
    # This Ray's address explicitly: other Ray instances may run on the same machine.
    alive = list_actors(address=ray.get_runtime_context().gcs_address,
                        filters=[("class_name", "=", "RayTrainWorker"), ("state", "=", "ALIVE")])
    return alive[0].pid if len(alive) == 1 else None


def test_killed_worker_is_replaced_and_counts_stay_exact(local_ray, s3, tmp_path, sqlite_uri):
    runs = s3.make_bucket("echoray-ckpt-worker") + "/runs"
    cfg = load_config(None, [f"tracking.uri={sqlite_uri}", "scaling.max_failures=1", "audit.enabled=true", "train.checkpoint_every=1",
                             f"train.storage_path={runs}",
                             "echo.stage=before_augment",
                             "echo.factor=1.5",
                             # 0.95, not 0.9: at e = 1.5 a 0.9 target was once reached in the
                             # epoch after the second checkpoint, before the kill landed.
                             "train.target=0.95", "train.max_epochs=20",
                             # 0.95 is still reached at epoch 3 (0.967), which trained in 0.9 s,
                             # about the time from epoch 2's checkpoint to the kill (driver poll,
                             # MLflow, this test's poll, the state API): the kill landed after
                             # the run's end, or in its finish, in 3 of 3 runs. Reads waiting
                             # 40 ms per 16 samples slow the epochs, and the kill follows epoch
                             # 1's checkpoint: it landed at step 67-93 of 99 after epoch 2's
                             # (5 runs), so epoch 2 and 3 together leave it a margin.
                             "source.kind=slow_store:SlowStore", "source.options={inner: digits, latency_ms: 40}"])
    out = tmp_path / "run"
    thread, box = train_in_background(cfg, out)
    run_id = wait_for(lambda: (out / "run.json").exists() and json.loads((out / "run.json").read_text())[
        "mlflow_run_id"], "the MLflow run")
    client = MlflowClient(sqlite_uri)
    # Epoch 1 is logged once its checkpoint is registered: kill the worker in the epochs after it.
    wait_for(lambda: len(logged_epochs(client, run_id)) >= 1, "a checkpointed epoch")
    pid = train_worker_pid()
    assert pid is not None, "the run ended before its worker could be killed"
    killed_at = time.time()
    os.kill(pid, signal.SIGKILL)
    thread.join(timeout=600)
    assert not thread.is_alive() and "error" not in box, box.get("error")
    s = box["summary"]

    restarts = s["faults"]["worker_group_restarts"]
    assert len(restarts) == 1 and restarts[0]["from_epoch"] >= 1
    failure = s["faults"]["worker_failures"][0]
    recovery_s = restarts[0]["first_step_at"] - killed_at
    print(f"\nworker killed after epoch {restarts[0]['from_epoch']}: failure seen "
          f"{failure['detected_at'] - killed_at:.1f} s later, new worker restored from the checkpoint at "
          f"{restarts[0]['restored_at'] - killed_at:.1f} s, training again at {recovery_s:.1f} s")
    assert "rank 0" in failure["errors"] and 0 < failure["detected_at"] - killed_at < recovery_s
    assert train_worker_pid() is None  # the run's workers are gone (and were replaced once)

    # The target is reached with the steps and examples of an unfailed run.
    assert s["target_reached"] is True and s["metric"]["value"] >= 0.95
    evaluations = s["evaluations"]
    assert evaluations > restarts[0]["from_epoch"] and s["steps"] == s["history"][-1]["step"]
    # evaluation i at i epochs of fresh examples: the first step past i x N_TRAIN fresh
    assert all(h["fresh_examples"] - BATCH < i * N_TRAIN <= h["fresh_examples"]
               for i, h in enumerate(s["history"], start=1))
    assert s["trained_examples"] == s["steps"] * BATCH

    # The audit: every step once, full batches, no copy of an example trained twice.
    audit = pq.read_table(out / "audit.parquet").to_pydict()
    assert len(audit["sample_id"]) == s["trained_examples"]
    assert Counter(audit["step"]) == {step: BATCH for step in range(s["steps"])}
    copies = Counter(zip(audit["epoch"], audit["sample_id"], audit["view"], strict=True))
    assert max(copies.values()) == 1
    # Fresh examples: the distinct (epoch, sample) trained, at every epoch and at the end.
    pairs = list(zip(audit["epoch"], audit["sample_id"], strict=True))
    assert s["fresh_examples"] == len(set(pairs))
    assert [h["fresh_examples"] for h in s["history"]] == [
        len({p for p, step in zip(pairs, audit["step"], strict=True) if step < h["step"]}) for h in s["history"]]

    # MLflow: one value per evaluation, at its step (none replayed twice), the run FINISHED.
    assert logged_epochs(client, run_id) == [h["step"] for h in s["history"]]
    assert client.get_run(run_id).info.status == "FINISHED"

    # The checkpoints are objects in the bucket under a folder named after the run, nothing
    # local. Ray Train registered one per epoch but the last (checkpoint_every 1, no minimum
    # interval; the epoch that ends the run saves none; with the audit on all are kept),
    # each holding every file of the checkpoint. (A folder the kill cut short may sit next
    # to them, registered nowhere.)
    storage = f"{runs}/{out.name}"
    assert json.loads((out / "run.json").read_text())["ray_train_storage"] == storage
    keys = s3.keys(f"{storage}/train")
    assert "checkpoint_manager_snapshot.json" in keys and not (out / "ray").exists()
    registered = [c for c, _ in Result.from_path(f"{storage}/train").best_checkpoints]
    assert [read_meta(c).evals for c in registered] == list(range(1, evaluations))
    for c in registered:
        name = c.path.rsplit("/", 1)[1]
        assert {"meta.json", "model.pt", "rank_0.json", "rank_0.pt", "consumed_0.npz", "audit_0.npz"} <= {
            k.split("/", 1)[1] for k in keys if k.startswith(name + "/")}
