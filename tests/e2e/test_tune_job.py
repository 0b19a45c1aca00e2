"""`ray job submit` of a 2-trial search (jobs/tune.py) against a local head with token
auth: the job SUCCEEDS and the real MLflow server holds one parent and two children."""

import json

from mlflow.tracking import MlflowClient
from test_job_submit import job_id_of, job_status, submit


def test_tune_job_succeeds_with_parent_and_child_runs_on_the_mlflow_server(ray_head, mlflow_server, tmp_path):
    out = tmp_path / "search"
    res = submit(ray_head, "python", "jobs/tune.py", "pipelines/digits_search.yaml", "--trials", "2",
                 "--repeats", "1", "--out", str(out), "--set", f"tracking.uri={mlflow_server}",
                 "--set", "tracking.experiment=e2e-tune", "--set", "train.max_epochs=2",
                 "--set", "train.target=0.5")
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    print(res.stdout[-6000:])  # the job's lines, in the log of a failed assertion below
    assert job_status(ray_head, job_id_of(res.stdout)) == "SUCCEEDED"
    assert res.stdout.count(" started: ") == 2 and "fresh examples to target over 1 repeat" in res.stdout

    summary = json.loads((out / "summary.json").read_text())
    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name("e2e-tune")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("echoray.kind") == "search"]
    assert [p.info.run_id for p in parents] == [summary["mlflow_parent_run_id"]]
    assert parents[0].info.status == "FINISHED"
    kids = {r.data.tags["echoray.trial_key"]: r for r in runs
            if r.data.tags.get("mlflow.parentRunId") == summary["mlflow_parent_run_id"]}
    assert sorted(kids) == ["r0-t0", "r0-t1"] and len(runs) == 3
    # the search's data on its parent, logged before the trials: they link the same rows
    data = {(i.tags[0].value, i.dataset.digest) for i in client.get_run(summary["mlflow_parent_run_id"]).inputs.dataset_inputs}
    assert {c for c, _ in data} == {"training", "evaluation"} and len(data) == 2
    for t in summary["trials"]:
        run = kids[t["trial_key"]]
        assert t["status"] != "error", t
        assert run.info.status == "FINISHED" and run.info.run_id == t["mlflow_run_id"]
        assert {(i.tags[0].value, i.dataset.digest) for i in client.get_run(run.info.run_id).inputs.dataset_inputs} == data
        assert run.data.params["optimizer.lr"] == str(t["params"]["optimizer.lr"])
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "accuracy")]  # optimizer steps
        assert len(steps) == t["evaluations"] and steps == sorted(set(steps)) and steps[0] > 0
    assert {"summary.json", "trials.png"} <= {a.path for a in client.list_artifacts(parents[0].info.run_id)}
