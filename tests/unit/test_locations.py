"""Where runs go and what the closing lines say: locally, and inside a `ray job submit` driver."""

import sys
from pathlib import Path

from echoray.messages import mlflow_command, where_lines
from echoray.storage.locations import JOB_ENV, default_sqlite_uri, in_ray_job, runs_root

SUMMARY = {"run_dir": "/home/u/echoray/runs/digits-1", "mlflow_run_id": "abc", "mlflow_experiment_id": "7",
           "mlflow_artifact_uri": "mlflow-artifacts:/7/abc/artifacts"}


def test_local_runs_stay_in_the_current_directory(monkeypatch, tmp_path):
    monkeypatch.delenv(JOB_ENV, raising=False)
    monkeypatch.delenv("ECHORAY_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert not in_ray_job()
    assert runs_root() == Path("runs")
    assert default_sqlite_uri() == f"sqlite:///{tmp_path / 'mlflow.db'}"


def test_a_job_keeps_runs_out_of_rays_working_dir(monkeypatch, tmp_path):
    monkeypatch.setenv(JOB_ENV, "{}")  # what Ray's job supervisor sets for a job's driver
    monkeypatch.delenv("ECHORAY_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # stands for .../runtime_resources/working_dir_files/_ray_pkg_x
    assert runs_root() == tmp_path / "home" / "echoray" / "runs"
    assert default_sqlite_uri() == f"sqlite:///{tmp_path / 'home' / 'echoray' / 'mlflow.db'}"
    assert (tmp_path / "home" / "echoray").is_dir()  # check_reachable needs the folder
    monkeypatch.setenv("ECHORAY_HOME", str(tmp_path / "elsewhere"))
    assert runs_root() == tmp_path / "elsewhere" / "runs"


def test_closing_lines_locally():
    lines = where_lines({**SUMMARY, "mlflow_tracking_uri": "sqlite:////w/mlflow.db"}, in_job=False, host="h",
                        mlflow_cmd="/w/.venv/bin/mlflow")
    assert lines == ["summary: /home/u/echoray/runs/digits-1/summary.json",
                     "MLflow UI: /w/.venv/bin/mlflow ui --backend-store-uri sqlite:////w/mlflow.db   (then open "
                     "http://127.0.0.1:5000/#/experiments/7/runs/abc?workflowType=machine_learning)"]
    http = where_lines({**SUMMARY, "mlflow_tracking_uri": "http://127.0.0.1:5000/"}, in_job=False, host="h")
    assert http[1] == "MLflow UI: http://127.0.0.1:5000/#/experiments/7/runs/abc?workflowType=machine_learning"


def test_closing_lines_in_a_job_name_the_node_the_artifacts_and_the_tunnel():
    lines = where_lines({**SUMMARY, "mlflow_tracking_uri": "http://10.0.1.23:5000"}, in_job=True, host="head-1")
    assert lines[0] == "run folder: /home/u/echoray/runs/digits-1 on head-1 (the node of the job's driver)"
    assert lines[1].endswith("are the MLflow run's artifacts: mlflow-artifacts:/7/abc/artifacts")
    assert lines[2].startswith("MLflow UI: http://10.0.1.23:5000/#/experiments/7/runs/abc?workflowType="
                               "machine_learning  (from outside the cluster")
    assert not any("mlflow ui" in line for line in lines)
    sqlite = where_lines({**SUMMARY, "mlflow_tracking_uri": "sqlite:////home/u/echoray/mlflow.db"}, True, "head-1")
    assert sqlite[2].startswith("MLflow store sqlite:////home/u/echoray/mlflow.db on head-1; the UI, there:")


def test_the_printed_mlflow_command_works_without_an_active_venv(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no mlflow on it
    assert mlflow_command() == str(Path(sys.executable).parent / "mlflow")
    assert Path(mlflow_command()).is_file()
