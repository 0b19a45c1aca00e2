"""The run's collector actor lost mid-run (SIGKILL of its process, as when its node goes):
the run ends with exit 1 and prints the resume command, writing nothing half (no
summary.json, no audit.parquet, run.json and the checkpoints as they were); `echoray
train --resume` then finishes it with the counts of an unfailed run. The collector held
the run's live state (final epochs, the audit since the last checkpoint), which the
checkpoints hold too. The resume may change the preprocessing pool (`--set
preprocess.actors.*`), not what decides the samples (scaling.num_workers: exit 2, named).
Echo before augmentation at an integer factor (2) over whole
read-plan epochs makes those counts exact for any seed."""

import json
import os
import signal
import subprocess
import time

from fault_runs import (
    BATCH,
    COPIES,
    EPOCHS,
    N_TRAIN,
    Driver,
    alive_actors,
    assert_exact_counts,
    echoray_bin,
    train_args,
)
from mlflow.tracking import MlflowClient

from helpers import wait_for

STEPS_PER_EPOCH = N_TRAIN * COPIES // BATCH


def collector_pids() -> list[int]:
    return [a.pid for a in alive_actors("RunCollector")]


def test_lost_collector_ends_the_run_and_resume_finishes_it_exactly(local_ray, tmp_path, sqlite_uri):
    run = tmp_path / "run"
    # Trained in the driver's process (Ray Train's local mode), checkpoints in the run folder
    # at every epoch; the slow store makes an epoch last ~3 s, so the kill lands inside epoch 2.
    a = Driver(train_args(sqlite_uri, run), tmp_path)
    a.wait_for_step(STEPS_PER_EPOCH + 1)  # epoch 1 done and checkpointed: training in epoch 2
    pids = wait_for(collector_pids, "the collector actor")
    assert len(pids) == 1, pids
    state_before = (run / "run.json").read_text()
    killed_at = time.time()
    os.kill(pids[0], signal.SIGKILL)
    assert a.finish() == 1, a.output[-3000:]
    ended_at = time.time()
    assert f"continue with: echoray train --resume {run}" in a.output
    assert "echoray: run failed: CollectorLost" in a.output
    # nothing half-written: no summary or audit, run.json untouched, the MLflow run FAILED
    assert not (run / "summary.json").exists() and not (run / "audit.parquet").exists()
    assert (run / "run.json").read_text() == state_before
    run_id = json.loads(state_before)["mlflow_run_id"]
    client = MlflowClient(sqlite_uri)
    assert client.get_run(run_id).info.status == "FAILED"

    # A resume that would change what the run trains is refused naming the key, nothing touched.
    refused = subprocess.run([echoray_bin(), "train", "--resume", str(run), "--set", "scaling.num_workers=2"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "scaling.num_workers cannot change on resume" in refused.stderr
    assert (run / "run.json").read_text() == state_before and client.get_run(run_id).info.status == "FAILED"

    # The resume goes on with a pool of two preprocessing actors (a cluster with more CPUs).
    wait_for(lambda: not alive_actors("MapWorker"), "the first driver's actors gone")
    b = Driver(["train", "--resume", str(run), "--set", "preprocess.actors.min_size=2",
                "--set", "preprocess.actors.max_size=2"], tmp_path)
    resumed_at, step = b.wait_for_step(1, since=ended_at)
    assert len(wait_for(lambda: alive_actors("MapWorker"), "the resumed run's actors")) == 2
    assert b.finish() == 0, b.output[-3000:]
    resumed = json.loads((run / "run.json").read_text())["resumes"][0]
    assert resumed["changed"] == {"preprocess.actors.max_size": ["1", "2"], "preprocess.actors.min_size": ["1", "2"]}
    resumed_from = resumed["from_epoch"]
    print(f"\ncollector killed: driver exit 1 after {ended_at - killed_at:.1f} s; the resumed run trained "
          f"(step {step}) {resumed_at - killed_at:.1f} s after the kill, from the checkpoint of evaluation "
          f"{resumed_from}")
    assert resumed_from >= 1 and f"from the checkpoint of evaluation {resumed_from}" in b.output

    s = json.loads((run / "summary.json").read_text())
    assert s["mlflow_run_id"] == run_id and s["epochs"] == EPOCHS
    assert [r["from_epoch"] for r in s["faults"]["driver_resumes"]] == [resumed_from]
    assert_exact_counts(s, run, N_TRAIN, EPOCHS, COPIES, BATCH)
    # one point per evaluation, at its optimizer step (none logged twice across the resume)
    assert sorted(m.step for m in client.get_metric_history(run_id, "accuracy")) == [h["step"] for h in s["history"]]
    assert [h["evaluation"] for h in s["history"]] == list(range(1, EPOCHS + 1))
    assert client.get_run(run_id).info.status == "FINISHED"
