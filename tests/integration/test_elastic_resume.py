"""Elastic resume: a run of two Ray Train workers whose driver is killed after its first
checkpoint, continued by `echoray train --resume RUN --set scaling.num_workers=1`, ends
with the counts of an unfailed run: every (epoch, sample) of every epoch trained exactly
its echo copies, each copy once, fresh = n_train x epochs (recovery/reshard.py merges the
two workers' counters into one; the pure resharding is tests/unit/test_reshard.py)."""

import json
import signal

import pyarrow.parquet as pq
from fault_runs import Driver, assert_each_copy_once, assert_two_workers_then_one

from helpers import wait_for

N_TRAIN, EPOCHS, BATCH, COPIES = 640, 3, 32, 2  # two workers: 20 steps of 2 x 32 an epoch; one: 40 of 32


def test_a_run_of_two_workers_resumed_with_one_trains_every_sample_once(local_ray, tmp_path, sqlite_uri):
    run = tmp_path / "run"
    sets = [f"tracking.uri={sqlite_uri}", f"source.limit={N_TRAIN}", f"train.batch_size={BATCH}",
            f"train.max_epochs={EPOCHS}", "train.target=null", "train.checkpoint_every=1",
            "echo.stage=before_augment", f"echo.factor={COPIES}", "audit.enabled=true",
            "scaling.num_workers=2", "scaling.cpus_per_worker=0.5", "train.log_every_s=0.3",
            "source.kind=slow_store:SlowStore", "source.options={inner: digits, latency_ms: 80}"]
    a = Driver(["train", *(x for s in sets for x in ("--set", s)), "--out", str(run)], tmp_path)
    snapshot = run / "ray" / "train" / "checkpoint_manager_snapshot.json"  # Ray Train registered one
    wait_for(snapshot.is_file, "the first checkpoint", timeout_s=300)
    a.proc.send_signal(signal.SIGKILL)  # the driver dies, its Ray Train workers and collector with it
    assert a.finish() == -signal.SIGKILL
    assert not (run / "summary.json").exists()

    b = Driver(["train", "--resume", str(run), "--set", "scaling.num_workers=1"], tmp_path)
    assert b.finish() == 0, b.output[-3000:]
    state = json.loads((run / "run.json").read_text())
    assert state["trainer"] == "ray_train"
    (resume,) = state["resumes"]
    assert 1 <= resume["from_epoch"] < EPOCHS and resume["changed"] == {"scaling.num_workers": ["2", "1"]}

    s = json.loads((run / "summary.json").read_text())
    assert s["epochs"] == s["evaluations"] == EPOCHS and s["workers"] == 1
    assert [h["evaluation"] for h in s["history"]] == list(range(1, EPOCHS + 1))
    assert s["fresh_examples"] == N_TRAIN * EPOCHS and s["trained_examples"] == N_TRAIN * EPOCHS * COPIES

    audit = pq.read_table(run / "audit.parquet").to_pydict()
    assert_each_copy_once(audit, N_TRAIN, EPOCHS, COPIES)
    # two workers up to the checkpoint, one after it: the steps of the checkpoint's evaluation
    at = next(h["step"] for h in s["history"] if h["evaluation"] == resume["from_epoch"])
    after = assert_two_workers_then_one(audit, at, N_TRAIN * EPOCHS * COPIES, BATCH)
    assert s["steps"] == at + len(after) // BATCH
