"""The object store goes away mid-run: the tests' S3 server (moto, its own process) is
frozen with SIGSTOP (connections are still accepted, nothing is answered: what a hung
store or a network partition looks like) and thawed with SIGCONT.

- shorter than the store's retry time (half of train.stall_timeout_s), during reads (the
  Parquet source in the bucket) and during a checkpoint write (the checkpoints in the bucket): the run waits, says so, and ends
  with the counters of an unfailed run;
- longer than the store's retry time, the same two places: the run ends with exit 1 and
  one line naming the URI, its MLflow run FAILED, the checkpoints before the outage whole and
  nothing half-written in the index; `echoray train --resume` then finishes it with the
  counters of an unfailed run.

Runs train in the driver's process (scaling.local_mode) attached to the tests' local Ray,
as in test_driver_resume.py; the store's retry time is 10 s (train.stall_timeout_s 20) so
the long case ends in ~15 s (a request to the frozen server times out after storage.REQUEST_TIMEOUT_S). Emulated read
latency paces the epochs (~1 s each) so the freeze falls mid-run."""

import contextlib
import json
import os
import signal
import time

import psutil
import pytest
import ray  # noqa: F401 - the local_ray fixture's
from mlflow.tracking import MlflowClient
from test_driver_resume import Driver, logged

from echoray.storage.fs import REQUEST_TIMEOUT_S
from helpers import wait_for

RETRY_S = 10
# The short outage must outlast any request in flight when the freeze starts, so that one
# fails and the retry is logged whatever the run was doing. A request waiting for its
# answer fails after REQUEST_TIMEOUT_S; one whose body was streaming (a checkpoint's part
# upload, a Parquet GET) after ~10 s, measured: curl's low-speed check averages over its
# last ~6 s, so the bytes just sent keep the speed above 1 B/s that long, then 3 s more.
# A 6 s freeze that began mid-upload was waited out by the upload itself, and nothing was
# logged (CI, 1 run in several). So: 16 s, and a retry_s of 20 for the short case.
BODY_TIMEOUT_S = 10 + REQUEST_TIMEOUT_S  # the upload fails, then the check of it does
SHORT_S = BODY_TIMEOUT_S + 3
SHORT_RETRY_S = SHORT_S + 4
# 8 epochs: the reads run ahead of training; with 4, every read was done by the first
# evaluation line and the freeze after it met none (measured)
EPOCHS, BATCH = 8, 32
CKPT_FILES = {"meta.json", "model.pt", "rank_0.json", "rank_0.pt", "consumed_0.npz"}
assert REQUEST_TIMEOUT_S + 1 < RETRY_S and BODY_TIMEOUT_S < SHORT_S < SHORT_RETRY_S


@contextlib.contextmanager
def frozen(s3):
    """The S3 server stopped (its process group: moto_server runs in its own session)."""
    os.killpg(s3.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(s3.proc.pid, signal.SIGCONT)


def reads_from_store(s3_data):
    """160 train images (200 rows, 20% held out) read from the bucket; checkpoints in the run folder."""
    return 160, ["--set", "source.kind=parquet", "--set", f"source.path={s3_data['parquet'][1]}",
                 "--set", "source.limit=160", "--set", "source.kind=slow_store:SlowStore",
                 "--set", "source.options={inner: parquet, latency_ms: 150}"]


def checkpoints_to_store(runs):
    """640 digits from memory; checkpoints in the bucket."""
    return 640, ["--set", "source.limit=640", "--set", f"train.storage_path={runs}",
                 "--set", "source.kind=slow_store:SlowStore", "--set", "source.options={inner: digits, latency_ms: 25}"]


def start(tmp_path, name, source_args, retry_s=RETRY_S):
    db = f"sqlite:///{tmp_path / f'{name}.db'}"
    run = tmp_path / name
    d = Driver(["train", *source_args, "--set", "scaling.local_mode=true", "--set", f"tracking.uri={db}",
                "--set", f"train.batch_size={BATCH}", "--set", f"train.max_epochs={EPOCHS}",
                "--set", "train.target=null", "--set", "train.checkpoint_every=1",
                "--set", f"train.stall_timeout_s={2 * retry_s}", "--out", str(run)], tmp_path)
    client = MlflowClient(db)

    def alive(ready):
        assert d.proc.poll() is None, d.output[-3000:]
        return ready()

    wait_for(lambda: alive((run / "run.json").exists), "run.json", timeout_s=120)
    run_id = json.loads((run / "run.json").read_text())["mlflow_run_id"]
    # the first evaluation line (the end of epoch 1): reads (paced by the emulated latency)
    # and checkpoints still to come
    wait_for(lambda: alive(lambda: any(ln.startswith("[echoray] eval   1 ") for ln in d.lines)),
             "the first evaluation", timeout_s=120)
    return d, run, client, run_id


def held_requests_answered(s3) -> bool:
    """No connection to the S3 server is left whose client has gone (CLOSE_WAIT, accepted or
    still in the listen queue): the server has handled and closed every request it held
    while frozen, such as a checkpoint index write of the failed run."""
    return not [c for c in psutil.net_connections("tcp")
                if c.laddr and c.laddr.port == s3.port and c.status == psutil.CONN_CLOSE_WAIT]


def checkpoint_index(s3, runs, run, where):
    """The run's checkpoint index: in the run folder (reads) or in the bucket (checkpoint write)."""
    if where == "reads":
        return json.loads((run / "ray" / "train_local" / "checkpoints.json").read_text())
    root = f"{runs.removeprefix('s3://')}/run/train_local"
    return json.loads(s3.filesystem().open_input_stream(f"{root}/checkpoints.json").read())


def first_checkpoint_indexed(s3, runs, run, where):
    try:
        return len(checkpoint_index(s3, runs, run, where)) >= 1
    except (FileNotFoundError, json.JSONDecodeError):
        return False


def assert_unfailed_counts(run, client, run_id, n_train, resumes):
    s = json.loads((run / "summary.json").read_text())
    assert s["mlflow_run_id"] == run_id and s["epochs"] == s["evaluations"] == EPOCHS
    assert [h["evaluation"] for h in s["history"]] == list(range(1, EPOCHS + 1))
    assert s["fresh_examples"] == n_train * EPOCHS
    assert s["steps"] == EPOCHS * n_train // BATCH and s["trained_examples"] == EPOCHS * n_train
    assert len(s["faults"].get("driver_resumes", [])) == resumes
    assert logged(client, run_id) == [h["step"] for h in s["history"]]  # one point per evaluation, at its step
    assert client.get_run(run_id).info.status == "FINISHED"
    assert len(client.search_runs([client.get_experiment_by_name("echoray").experiment_id])) == 1
    return s


def console_log(run):
    return (run / "console.log").read_text()


@pytest.mark.parametrize("where", ["reads", "checkpoint write"])
def test_an_outage_shorter_than_retry_s_is_waited_out(local_ray, s3, s3_data, tmp_path, where):
    runs = s3.make_bucket(f"echoray-outage-short-{where.split()[0]}") + "/runs"
    n_train, args = reads_from_store(s3_data) if where == "reads" else checkpoints_to_store(runs)
    d, run, client, run_id = start(tmp_path, "run", args, retry_s=SHORT_RETRY_S)
    with frozen(s3):
        time.sleep(SHORT_S)
        assert d.proc.poll() is None
    assert d.finish() == 0, d.output[-3000:]
    assert_unfailed_counts(run, client, run_id, n_train, resumes=0)
    log = console_log(run)
    uri = f"source.path {s3_data['parquet'][1]}" if where == "reads" else f"train.storage_path {runs}/run/train_local"
    assert f"{uri}" in log and "object store not answering" in log and "answered again after" in log, log[-3000:]
    if where == "checkpoint write":
        kept = json.loads(s3.filesystem().open_input_stream(
            f"{runs.removeprefix('s3://')}/run/train_local/checkpoints.json").read())
        assert [k["epoch"] for k in kept] == [EPOCHS - 1, EPOCHS]  # the last two checkpoints are kept
        keys = s3.keys(f"{runs}/run/train_local")
        assert sorted({k.split("/")[0] for k in keys}) == [f"checkpoint_{EPOCHS - 1:06d}", f"checkpoint_{EPOCHS:06d}",
                                                           "checkpoints.json"]


# "checkpoint write": the epoch whose checkpoint write failed was logged to MLflow by the
# failed run and trained again by the resumed one, which logged it again ([1, 2, 2, 3, ...])
# until the resumed driver skipped the epochs MLflow already holds (run._RunEvents).
@pytest.mark.parametrize("where", ["reads", "checkpoint write"])
def test_an_outage_longer_than_retry_s_fails_the_run_and_resume_finishes_it(local_ray, s3, s3_data, tmp_path, where):
    runs = s3.make_bucket(f"echoray-outage-long-{where.split()[0]}") + "/runs"
    n_train, args = reads_from_store(s3_data) if where == "reads" else checkpoints_to_store(runs)
    d, run, client, run_id = start(tmp_path, "run", args)
    # the epoch line comes before its checkpoint is indexed: a freeze right after it could
    # fall before the first index write (seen in CI), leaving no whole checkpoint to check
    wait_for(lambda: first_checkpoint_indexed(s3, runs, run, where), "the first checkpoint in the index",
             timeout_s=60)
    with frozen(s3):
        t = time.monotonic()
        rc = d.finish(timeout_s=RETRY_S + 6 * REQUEST_TIMEOUT_S + 30)
        failed_after = time.monotonic() - t
    assert rc == 1, d.output[-3000:]
    assert RETRY_S <= failed_after, failed_after
    uri = f"source.path {s3_data['parquet'][1]}" if where == "reads" else f"train.storage_path {runs}/run/train_local"
    failure = [ln for ln in d.lines if ln.startswith("echoray: run failed")]
    assert len(failure) == 1 and uri in failure[0] and f"(retried for {RETRY_S} s, half of train.stall_timeout_s)" in failure[0], d.output[-3000:]
    assert client.get_run(run_id).info.status == "FAILED" and not (run / "summary.json").exists()

    # the checkpoints before the outage are whole; the index names no other
    wait_for(lambda: held_requests_answered(s3), "the requests the frozen server held to be answered", timeout_s=60)
    index = checkpoint_index(s3, runs, run, where)
    if where == "checkpoint write":
        keys = s3.keys(f"{runs}/run/train_local")
        for k in index:
            assert {key.split("/", 1)[1] for key in keys if key.startswith(k["name"] + "/")} == CKPT_FILES
    assert 1 <= index[-1]["epoch"] < EPOCHS

    r = Driver(["train", "--resume", str(run)], tmp_path)
    assert r.finish() == 0, r.output[-3000:]
    s = assert_unfailed_counts(run, client, run_id, n_train, resumes=1)
    assert s["faults"]["driver_resumes"][0]["from_epoch"] == index[-1]["epoch"]
