"""A trial's MLflow run status follows the outcome the search recorded (tune/mlflow_runs.py)."""

from mlflow.tracking import MlflowClient

from echoray.tune.mlflow_runs import end_unfinished_children, mark_failed


def test_an_errored_trials_run_ends_failed_whatever_ended_it_first(sqlite_uri):
    client = MlflowClient(sqlite_uri)
    exp = client.create_experiment("echoray")
    parent = client.create_run(exp).info.run_id
    child = {name: client.create_run(exp, tags={"mlflow.parentRunId": parent}).info.run_id
             for name in ("killed", "failed", "running")}
    client.set_terminated(child["killed"], status="KILLED")  # ended by the interrupted search
    client.set_terminated(child["failed"], status="FAILED")  # ended by the trial itself
    for run_id in child.values():
        mark_failed(sqlite_uri, run_id)
    assert {k: client.get_run(v).info.status for k, v in child.items()} == {
        "killed": "FAILED", "failed": "FAILED", "running": "FAILED"}
    assert end_unfinished_children(sqlite_uri, parent) == 0  # none is left RUNNING
