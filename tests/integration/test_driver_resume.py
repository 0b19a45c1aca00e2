"""The driver dies: SIGKILL (nothing can clean up), then SIGTERM (a scheduler's stop) on
the resumed run, then `echoray train --resume` finishes it. Counters, the audit and the
MLflow history come out as one unbroken run, with a Ray Train worker group or trained in
the driver's process (scaling.local_mode, its checkpoints in recovery/checkpoint_store.py). Batch echoing at e = 1.5 makes the counts
depend on every batch's repeat draw, and a checkpoint can fall between two repeats of
a batch, which the resumed run must finish.

The drivers attach to the tests' local Ray (RAY_ADDRESS), as `ray job submit` drivers
do, so no Ray start is paid per process; a driver that dies takes its job's actors
(Ray Train controller, workers, collector) with it. The checkpoints are in the run folder
(the default) or in the tests' S3 bucket (train.storage_path=s3://...): --resume finds
them through the storage recorded in run.json."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray
from mlflow.tracking import MlflowClient

from echoray.data.echo import batch_repeats
from helpers import wait_for

N_EPOCHS, N_TRAIN, BATCH = 6, 640, 32  # read-plan epochs: 20 batches each, the whole stream consumed
REPEATS = [batch_repeats(0, i, 1.5) for i in range(N_EPOCHS * N_TRAIN // BATCH)]  # seed 0


def echoray_bin() -> str:
    return str(Path(sys.executable).parent / "echoray")


class Driver:
    """`echoray` in a subprocess, its output collected as it comes."""

    def __init__(self, args, cwd, address=None):
        """`address`: the Ray to attach to (default: the tests' local Ray)."""
        env = {**os.environ, "RAY_ADDRESS": address or ray.get_runtime_context().gcs_address}
        self.proc = subprocess.Popen([echoray_bin(), *args], cwd=cwd, env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            print(f'{time.monotonic():.1f} {line}', end='', flush=True)

    def wait_for_line(self, text, timeout_s=300):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if any(text in line for line in self.lines):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"no {text!r} in:\n{''.join(self.lines)[-4000:]}")

    def finish(self, timeout_s=600) -> int:
        rc = self.proc.wait(timeout=timeout_s)
        self._reader.join(timeout=10)
        return rc

    @property
    def output(self) -> str:
        return "".join(self.lines)


def logged(client, run_id):
    return sorted(m.step for m in client.get_metric_history(run_id, "accuracy"))


# Ray Train with its checkpoints in the run folder, the in-process trainer with them in S3.
# A Ray Train group restoring from S3 is test_worker_failure.py's (its restart reads the
# checkpoint as a resume does; a third case here cost ~100 s of the suite).
@pytest.mark.parametrize("storage, trainer", [("run folder", "ray_train"), ("s3", "local_mode")])
def test_killed_driver_resumes_into_one_unbroken_run(local_ray, s3, tmp_path, sqlite_uri, storage, trainer):
    db = sqlite_uri
    run = tmp_path / "run"
    runs = s3.make_bucket(f"echoray-ckpt-resume-{trainer.replace('_', '-')}") + "/runs" if storage == "s3" else None
    a = Driver(["train", *(["--set", f"train.storage_path={runs}"] if runs else []),
                "--set", f"scaling.local_mode={trainer == 'local_mode'}",
                "--set", f"tracking.uri={db}", "--set", f"source.limit={N_TRAIN}",
                "--set", "train.batch_size=32", "--set", f"train.max_epochs={N_EPOCHS}", "--set", "train.target=null",
                "--set", "train.checkpoint_every=1",
                "--set", "echo.stage=batch", "--set", "echo.factor=1.5",
                "--set", "audit.enabled=true", "--set", "source.kind=slow_store:SlowStore",
                "--set", "source.options={inner: digits, latency_ms: 2}", "--out", str(run)], tmp_path)
    client = MlflowClient(db)
    wait_for(lambda: (run / "run.json").exists(), "run.json")
    run_id = json.loads((run / "run.json").read_text())["mlflow_run_id"]
    wait_for(lambda: len(logged(client, run_id)) >= 2, "two epochs logged (so checkpointed)")
    a.proc.kill()  # SIGKILL: no handler runs, the MLflow run stays RUNNING
    assert a.finish() == -signal.SIGKILL
    assert client.get_run(run_id).info.status == "RUNNING" and not (run / "summary.json").exists()

    b = Driver(["train", "--resume", str(run)], tmp_path)
    b.wait_for_line("resuming")
    # "resuming" is said when the MLflow run reopens; run.json records the resume just after
    wait_for(lambda: json.loads((run / "run.json").read_text())["resumes"], "the resume in run.json")
    resumed_from = json.loads((run / "run.json").read_text())["resumes"][0]["from_epoch"]
    assert resumed_from >= 2
    wait_for(lambda: len(logged(client, run_id)) >= resumed_from + 1, "an evaluation logged after the resume")
    b.proc.send_signal(signal.SIGTERM)
    assert b.finish() == 143, b.output[-3000:]
    assert "echoray: interrupted" in b.output and f"echoray train --resume {run}" in b.output
    assert client.get_run(run_id).info.status == "KILLED" and not (run / "summary.json").exists()

    c = Driver(["train", "--resume", str(run)], tmp_path)
    assert c.finish() == 0, c.output[-3000:]
    s = json.loads((run / "summary.json").read_text())
    assert s["mlflow_run_id"] == run_id and s["epochs"] == s["evaluations"] == N_EPOCHS
    assert [r["from_epoch"] for r in s["faults"]["driver_resumes"]][0] == resumed_from
    assert len(s["faults"]["driver_resumes"]) == 2 and s["faults"]["worker_group_restarts"] == []
    # the counts of an unfailed run: every read once, every batch repeated as drawn
    assert [h["evaluation"] for h in s["history"]] == list(range(1, N_EPOCHS + 1))
    assert s["fresh_examples"] == N_TRAIN * N_EPOCHS
    assert s["steps"] == sum(REPEATS) and s["trained_examples"] == BATCH * sum(REPEATS)

    # the audit of the whole run: each (read-plan epoch, example, repeat) once; all epochs read in full
    audit = pq.read_table(run / "audit.parquet").to_pydict()
    rows = Counter(zip(audit["epoch"], audit["sample_id"], audit["view"], strict=True))
    assert len(rows) == len(audit["step"]) == s["trained_examples"] and set(rows.values()) == {1}
    firsts = Counter((e, i) for e, i, v in rows if v == 0)
    assert len(firsts) == N_TRAIN * N_EPOCHS and Counter(e for e, _ in firsts) == {e: N_TRAIN for e in range(N_EPOCHS)}
    assert Counter(audit["step"]) == {step: BATCH for step in range(sum(REPEATS))}

    # one MLflow run, every epoch logged once, FINISHED
    assert logged(client, run_id) == [h["step"] for h in s["history"]]  # one point per evaluation, at its step
    assert client.get_run(run_id).info.status == "FINISHED"
    assert len(client.search_runs([client.get_experiment_by_name("echoray").experiment_id])) == 1

    # the checkpoints stayed where the run put them, kept by the trainer the run started with
    state = json.loads((run / "run.json").read_text())
    assert state["trainer"] == trainer
    folder, index = ("train_local", "checkpoints.json") if trainer == "local_mode" else \
        ("train", "checkpoint_manager_snapshot.json")
    if runs:
        assert state["ray_train_storage"] == f"{runs}/run"
        assert index in s3.keys(f"{runs}/run/{folder}")
        assert not (run / "ray").exists()
    else:
        assert (run / "ray" / folder / index).is_file()

    # a finished run is not resumed again
    again = subprocess.run([echoray_bin(), "train", "--resume", str(run)], capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 2 and "already finished" in again.stderr
