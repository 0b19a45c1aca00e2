"""`ray job submit` of the train job against a local head, results in a real MLflow
server, data and checkpoints on the tests' S3 server; a stalled pipeline on a cluster
fails naming the missing resource."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from mlflow.tracking import MlflowClient
from ray.job_submission import JobSubmissionClient

from echoray.config_load import load_config
from echoray.data.sources import index_source
from helpers import REPO

BIN = Path(sys.executable).parent


def submit(head, *entrypoint, timeout=900, runtime_env_json=None, working_dir=str(REPO)):
    env_args = ["--runtime-env-json", runtime_env_json] if runtime_env_json else [
        "--runtime-env", str(REPO / "jobs" / "runtime_env.yaml")]
    cmd = [str(BIN / "ray"), "job", "submit", "--address", head["dashboard"], "--working-dir", working_dir,
           *env_args, "--", *entrypoint]
    for _ in range(30):  # the head's job agent registers a little after the dashboard answers
        res = subprocess.run(cmd, cwd=REPO, env=head["env"], capture_output=True, text=True, timeout=timeout)
        if "No available agent to submit job" not in res.stdout + res.stderr:
            return res
        time.sleep(2)
    return res


def job_status(head, job_id: str) -> str:
    """Through Ray's SDK, presenting the cluster's token explicitly."""
    client = JobSubmissionClient(head["dashboard"], headers={"Authorization": f"Bearer {head['token']}"})
    return str(client.get_job_status(job_id).value)


def job_id_of(output: str) -> str:
    for line in output.splitlines():
        if "Job '" in line and "submitted successfully" in line:
            return line.split("Job '")[1].split("'")[0]
    raise AssertionError(f"no job id in:\n{output[-2000:]}")


def test_train_job_on_s3_succeeds_and_logs_to_the_mlflow_server(ray_head, mlflow_server, s3, s3_data, tmp_path):
    """Images from s3://, checkpoints to s3://; the head has no AWS settings, the job gets
    them in its runtime env from jobs/aws_runtime_env.py (the README's recipe)."""
    out_dir = tmp_path / "job_run"
    ckpt = s3.make_bucket("echoray-ckpt-job") + "/runs"
    source = ["--set", "source.kind=image_folder", "--set", f"source.path={s3_data['image_folder'][1]}",
              "--set", "source.image_size=32"]
    runtime_env = subprocess.run([sys.executable, "jobs/aws_runtime_env.py"], cwd=REPO, env={**os.environ, **s3.env},
                                 capture_output=True, text=True, check=True).stdout
    assert json.loads(runtime_env)["env_vars"]["AWS_ENDPOINT_URL"] == s3.endpoint
    res = submit(ray_head, "python", "jobs/train.py", "--set", f"tracking.uri={mlflow_server}",
                 "--set", "tracking.experiment=e2e", *source, "--set", "train.max_epochs=2", "--set", "train.batch_size=32",
                 "--set", "train.target=null", "--set", "train.checkpoint_every=1", "--set", f"train.storage_path={ckpt}",
                 "--out", str(out_dir), runtime_env_json=runtime_env)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    job_id = job_id_of(res.stdout)
    assert job_status(ray_head, job_id) == "SUCCEEDED"
    assert "eval   2  epoch" in res.stdout
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["mlflow_tracking_uri"] == mlflow_server
    n_train = len(index_source(load_config(None, source[1::2]).source).train_ids)
    assert n_train == 160 and summary["fresh_examples"] == summary["trained_examples"] == 2 * n_train  # 5 steps/epoch
    # epoch 1's checkpoint (the last epoch saves none) went to the bucket, nothing local
    keys = s3.keys(f"{ckpt}/{out_dir.name}/train")
    assert "checkpoint_manager_snapshot.json" in keys and any(k.endswith("/meta.json") for k in keys)
    assert not (out_dir / "ray").exists()
    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name("e2e")
    runs = client.search_runs([exp.experiment_id])
    assert [r.info.run_id for r in runs] == [summary["mlflow_run_id"]]
    assert runs[0].info.status == "FINISHED" and runs[0].data.params["source.kind"] == "image_folder"
    assert [m.step for m in client.get_metric_history(summary["mlflow_run_id"], "accuracy")] == [
        h["step"] for h in summary["history"]]  # MLflow's step: optimizer steps
    assert "summary.json" in {a.path for a in client.list_artifacts(summary["mlflow_run_id"])}


def test_platform_is_the_stdlib_in_ray_workers_started_in_the_repo(ray_head):
    code = ("import ray, platform; ray.init(); "
            "f = ray.remote(lambda: __import__('platform').python_implementation()); "
            "print('IMPL', platform.python_implementation(), ray.get(f.remote()))")
    res = submit(ray_head, "python", "-c", code, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:]
    assert "IMPL CPython CPython" in res.stdout


def test_stalled_pipeline_fails_naming_the_missing_resource(ray_head, tmp_path, sqlite_uri):
    db = sqlite_uri
    res = subprocess.run(
        # 3 workers x 1 CPU + a 0.5-CPU actor on a 2-CPU head with no autoscaler: nothing
        # will ever fit, so any timeout ends it (5 s). (A missing custom resource is no
        # stall there: it falls back, see runtime/placement.py.) The stalled fit has no
        # controller to abort (its worker group never started): the driver abandons it
        # and exits without waiting run.FIT_JOIN_S for it (run._end_collector).
        [str(BIN / "echoray"), "train", "--set", "scaling.num_workers=3",
         "--set", "train.stall_timeout_s=5", "--set", f"tracking.uri={db}", "--out", str(tmp_path / "r")],
        env={**ray_head["env"], "RAY_ADDRESS": ray_head["gcs"]}, capture_output=True, text=True, timeout=400)
    assert res.returncode == 1, res.stderr[-3000:]
    assert "no training progress for" in res.stderr
    assert "CPU: needs 3.5, cluster has 2" in res.stderr
    assert not (tmp_path / "r" / "summary.json").exists()
    client = MlflowClient(db)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.info.status for r in runs] == ["FAILED"]
