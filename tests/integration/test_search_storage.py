"""A search whose home is in the object store (train.storage_path=s3://...: Tune's
experiment, search.json, each trial's run folder) is resumed from its URI on "another
machine": the local folder is deleted after a Ctrl-C, and `echoray tune --resume
s3://...` runs from another working directory. The ended trial is not rerun (its MLflow
run is kept), the other one runs, and the bucket and MLflow hold one row per trial.

The drivers attach to the tests' local Ray (RAY_ADDRESS), as `ray job submit` drivers
do; the AWS variables of the tests' S3 server are in their environment."""

import json
import shutil
import signal
from pathlib import Path

import yaml
from mlflow.tracking import MlflowClient
from test_driver_resume import Driver
from test_tune_search import children
from two_nodes import two_node_cluster

from echoray.config_load import read_yaml
from echoray.tune.outcome import NOT_REACHED, REACHED

TRIALS = 2


def write_pipeline(tmp_path):
    tree = read_yaml(Path(__file__).parents[2] / "pipelines" / "digits_search.yaml")
    # The second trial needs two epochs for 0.8 (seen: accuracy 0.59 after one): some seconds
    # in which the interrupt sent when the first one ends reaches Tune.
    tree["train"].update(max_epochs=2, target=0.8)
    tree["search"].update(max_concurrent=1, space={"optimizer.lr": {"choices": [0.05, 0.1]}})
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def test_a_search_in_the_object_store_resumes_from_its_uri_elsewhere(local_ray, s3, tmp_path, sqlite_uri):
    """search.max_concurrent 1: the interrupt comes as the first trial ends, before the
    second can (`[1/2 ended]` counts the search's trials, not the one Tune has made)."""
    bucket = s3.make_bucket("echoray-searches")
    db = sqlite_uri
    out = tmp_path / "here" / "search"
    out.parent.mkdir()
    home = f"{bucket}/searches/search"
    first = Driver(["tune", str(write_pipeline(tmp_path)), "--trials", str(TRIALS), "--repeats", "1",
                    "--out", str(out), "--set", f"tracking.uri={db}",
                    "--set", f"train.storage_path={bucket}/searches"], out.parent)
    first.wait_for_line("[1/2 ended]", timeout_s=300)
    first.proc.send_signal(signal.SIGINT)
    assert first.finish() == 130, first.output[-3000:]
    assert f"echoray tune --resume {home}" in first.output

    state = json.loads((out / "search.json").read_text())
    assert state["storage"] == home
    keys = s3.keys(home)
    assert "search.json" in keys and any(k.startswith("tune/") for k in keys)
    ended = {k.split("/")[1] for k in keys if k.startswith("trials/") and k.endswith("/summary.json")}
    assert len(ended) == 1  # the ended trial's run folder, copied to the bucket

    client = MlflowClient(db)
    parent = state["parent_run_id"]
    before = {r.data.tags["echoray.trial_key"]: r.info.run_id for r in children(client, parent)
              if r.info.status == "FINISHED"}
    assert len(before) == 1

    shutil.rmtree(out)  # another machine: nothing local
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    second = Driver(["tune", "--resume", home], elsewhere)
    assert second.finish() == 0, second.output[-3000:]
    assert second.output.count(" started: ") == 1  # only the trial that had not ended

    summary = json.loads((elsewhere / "runs" / "search" / "summary.json").read_text())
    assert [t["trial_key"] for t in summary["trials"]] == ["r0-t0", "r0-t1"]
    assert all(t["status"] in (REACHED, NOT_REACHED) for t in summary["trials"]), summary["trials"]
    runs = {r.data.tags["echoray.trial_key"]: r for r in children(client, parent)}
    assert len(children(client, parent)) == TRIALS and set(runs) == {"r0-t0", "r0-t1"}
    assert all(r.info.status == "FINISHED" for r in runs.values())
    assert {k: runs[k].info.run_id for k in before} == before  # the ended trial kept its run
    assert {t["trial_key"]: t["mlflow_run_id"] for t in summary["trials"]} == \
        {k: r.info.run_id for k, r in runs.items()}
    assert client.get_run(parent).info.status == "FINISHED"

    keys = s3.keys(home)
    assert {"search.json", "summary.json", "trials.png"} <= set(keys)
    assert len({k.split("/")[1] for k in keys if k.startswith("trials/") and k.endswith("/summary.json")}) == TRIALS
    again = Driver(["tune", "--resume", home], elsewhere)
    assert again.finish() == 2 and "already finished" in again.output


def test_a_local_search_folder_on_a_cluster_of_two_nodes_is_refused(tmp_path):
    """As for training: with two nodes, trials on the second could not reach a local
    folder, so a search without train.storage_path (its folder) or with a local one is
    refused before anything starts (exit 2 naming the key; no folder, no MLflow run)."""
    db = tmp_path / "mlflow.db"
    with two_node_cluster() as address:
        for storage in ([], ["--set", f"train.storage_path={tmp_path / 'store'}"]):
            out = tmp_path / "search"
            d = Driver(["tune", str(write_pipeline(tmp_path)), "--trials", "1", "--repeats", "1", "--out", str(out),
                        "--set", f"tracking.uri=sqlite:///{db}", *storage], tmp_path, address=address)
            assert d.finish(timeout_s=180) == 2, d.output[-3000:]
            location = tmp_path / "store" / "search" if storage else out
            assert f"train.storage_path {location}: a local folder, but this cluster has 2 nodes" in d.output
            assert not out.exists() and not (tmp_path / "store").exists()
    assert not db.exists() or not MlflowClient(f"sqlite:///{db}").search_runs(
        [e.experiment_id for e in MlflowClient(f"sqlite:///{db}").search_experiments()])
