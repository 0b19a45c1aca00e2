"""`ray job submit` of the train job against a local head, results in a real MLflow
server; a stalled pipeline on a cluster fails naming the missing resource."""

import json
import subprocess
import sys
import time
from pathlib import Path

from mlflow.tracking import MlflowClient
from ray.job_submission import JobSubmissionClient

from helpers import REPO

BIN = Path(sys.executable).parent


def submit(head, *entrypoint, timeout=900):
    cmd = [str(BIN / "ray"), "job", "submit", "--address", head["dashboard"], "--working-dir", str(REPO),
           "--runtime-env", str(REPO / "jobs" / "runtime_env.yaml"), "--", *entrypoint]
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


def test_train_job_succeeds_and_logs_to_the_mlflow_server(ray_head, mlflow_server, tmp_path):
    out_dir = tmp_path / "job_run"
    res = submit(ray_head, "python", "jobs/train.py", "--set", f"tracking.uri={mlflow_server}",
                 "--set", "tracking.experiment=e2e", "--set", "source.limit=256", "--set", "train.max_epochs=2",
                 "--set", "train.target=null", "--out", str(out_dir))
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    job_id = job_id_of(res.stdout)
    assert job_status(ray_head, job_id) == "SUCCEEDED"
    assert "epoch   2" in res.stdout
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["mlflow_tracking_uri"] == mlflow_server
    assert summary["fresh_examples"] == summary["trained_examples"] == 2 * (256 // 64) * 64
    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name("e2e")
    runs = client.search_runs([exp.experiment_id])
    assert [r.info.run_id for r in runs] == [summary["mlflow_run_id"]]
    assert runs[0].info.status == "FINISHED" and runs[0].data.params["source.limit"] == "256"
    assert [m.step for m in client.get_metric_history(summary["mlflow_run_id"], "accuracy")] == [1, 2]
    assert "summary.json" in {a.path for a in client.list_artifacts(summary["mlflow_run_id"])}


def test_platform_is_the_stdlib_in_ray_workers_started_in_the_repo(ray_head):
    code = ("import ray, platform; ray.init(); "
            "f = ray.remote(lambda: __import__('platform').python_implementation()); "
            "print('IMPL', platform.python_implementation(), ray.get(f.remote()))")
    res = submit(ray_head, "python", "-c", code, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:]
    assert "IMPL CPython CPython" in res.stdout


def test_stalled_pipeline_fails_naming_the_missing_resource(ray_head, tmp_path):
    db = f"sqlite:///{tmp_path / 'mlflow.db'}"
    res = subprocess.run(
        # 3 workers x 1 CPU + a 0.5-CPU actor on a 2-CPU head with no autoscaler: nothing
        # will ever fit. (A missing custom resource is no stall there: it falls back, see
        # runtime/placement.py.)
        [str(BIN / "echoray"), "train", "--set", "scaling.num_workers=3",
         "--set", "train.stall_timeout_s=25", "--set", f"tracking.uri={db}", "--out", str(tmp_path / "r")],
        env={**ray_head["env"], "RAY_ADDRESS": ray_head["gcs"]}, capture_output=True, text=True, timeout=400)
    assert res.returncode == 1, res.stderr[-3000:]
    assert "no training progress for" in res.stderr
    assert "CPU: needs 3.5, cluster has 2" in res.stderr
    assert not (tmp_path / "r" / "summary.json").exists()
    client = MlflowClient(db)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.info.status for r in runs] == ["FAILED"]
