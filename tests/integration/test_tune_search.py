"""`echoray tune` on digits through the console script: 3 trials x 2 repeats, interrupted
with Ctrl-C after the first trials end, then `--resume`. One search exercises the whole
contract: MLflow holds one parent and exactly one child per trial (finished trials are
not rerun, partial attempts are not duplicated), children carry their point's params,
diverging trials fail without stopping the others, and summary.json matches the runs."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import ray
import yaml
from mlflow.tracking import MlflowClient
from test_cli_run import echoray_bin
from test_train_pipeline import assert_final_model

from echoray.config_load import load_config, read_yaml
from echoray.tune.space import SearchPoints

# Seed 0's 6 points: lr 0.03, 10000, 0.03 (repeat 0) and 0.1, 0.03, 10000 (repeat 1): a
# diverging trial in each repeat among ones that train. (4 trials, 8 points, trained two
# more of 0.03 and 0.1 for no further case.)
TRIALS, REPEATS = 3, 2
DIVERGING_LR = 10000.0  # NaN loss in epoch 1: the trial fails, the search goes on


def write_pipeline(tmp_path: Path) -> Path:
    tree = read_yaml(Path(__file__).parents[2] / "pipelines" / "digits_search.yaml")
    tree["train"].update(max_epochs=3, target=0.8)
    tree["search"]["space"] = {
        "optimizer.lr": {"choices": [0.03, 0.1, DIVERGING_LR]},
        "optimizer.momentum": {"low": 0.05, "high": 0.3, "scale": "log", "one_minus": True},
    }
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def children(client: MlflowClient, parent_id: str):
    exp = client.get_run(parent_id).info.experiment_id
    return client.search_runs([exp], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'")


def test_search_interrupted_and_resumed_keeps_one_run_per_trial(local_ray, tmp_path, sqlite_uri):
    # both searches attach to the tests' local Ray, as `ray job submit` drivers do: no Ray
    # start and stop per process (~40 s of this test's 112 s when each started its own)
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    pipeline = write_pipeline(tmp_path)
    uri = sqlite_uri
    out = tmp_path / "search"
    cmd = [echoray_bin(), "tune", str(pipeline), "--trials", str(TRIALS), "--repeats", str(REPEATS),
           "--out", str(out), "--set", f"tracking.uri={uri}", "--set", "tracking.register_model=search-best"]
    first = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, deadline = [], time.time() + 480
    for line in first.stdout:  # interrupt once two trials have ended
        lines.append(line)
        if sum("[echoray] trial r" in ln and "ended]" in ln for ln in lines) >= 2:
            first.send_signal(signal.SIGINT)
            break
        assert time.time() < deadline, "".join(lines[-40:])
    rest, _ = first.communicate(timeout=240)
    assert first.returncode == 130, "".join(lines[-20:]) + rest[-3000:]
    assert f"echoray tune --resume {out}" in rest
    assert not (out / "summary.json").exists()

    client = MlflowClient(uri)
    state = json.loads((out / "search.json").read_text())
    parent_id = state["parent_run_id"]
    assert client.get_run(parent_id).info.status == "KILLED"
    before = {r.data.tags["echoray.trial_key"]: r for r in children(client, parent_id)}
    assert all(r.info.status != "RUNNING" for r in before.values())
    ended_before = {k: r.info.run_id for k, r in before.items() if r.info.status in ("FINISHED", "FAILED")}
    assert len(ended_before) >= 2

    second = subprocess.run([echoray_bin(), "tune", "--resume", str(out)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    # Tune reran only what had not ended (a trial that finished as the interrupt came is
    # taken from its MLflow run, not retrained): the ended trials kept their runs.
    assert second.stdout.count(" started: ") <= TRIALS * REPEATS - 2

    runs = {r.data.tags["echoray.trial_key"]: r for r in children(client, parent_id)}
    assert len(children(client, parent_id)) == TRIALS * REPEATS  # one active run per trial
    assert {k: runs[k].info.run_id for k in ended_before} == ended_before
    assert all(runs[k].info.start_time == before[k].info.start_time for k in ended_before)
    assert client.get_run(parent_id).info.status == "FINISHED"

    cfg = load_config(pipeline)
    points = SearchPoints(cfg.search, cfg.seed, TRIALS, REPEATS)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mlflow_parent_run_id"] == parent_id
    by_key = {t["trial_key"]: t for t in summary["trials"]}
    for k in range(TRIALS * REPEATS):
        point = points.point(k)
        key = f"r{point['repeat']}-t{point['index']}"
        run, rec = runs[key], by_key[key]
        assert run.data.params["optimizer.lr"] == str(point["params"]["optimizer.lr"])
        assert run.data.params["optimizer.momentum"] == str(point["params"]["optimizer.momentum"])
        assert rec["params"] == point["params"]
        if point["params"]["optimizer.lr"] == DIVERGING_LR:
            assert run.info.status == "FAILED" and rec["status"] == "error" and "diverged" in rec["error"]
            assert rec["mlflow_run_id"] == run.info.run_id
        else:
            assert run.info.status == "FINISHED" and rec["status"] in ("reached", "not_reached")
            reached = "fresh_examples_to_target" in run.data.metrics
            assert reached == (rec["status"] == "reached")
            if reached:
                assert run.data.metrics["fresh_examples_to_target"] == rec["fresh_examples_to_target"]
            # every trial that trained logged the weights it ended with (a warm trial keeps no checkpoint)
            last = client.get_metric_history(run.info.run_id, "epoch")[-1].value
            assert_final_model(client, run.info.run_id, last)
    assert any(p["params"]["optimizer.lr"] == DIVERGING_LR for p in map(points.point, range(len(points))))

    for rep in summary["repeats"]:  # best per repeat = fewest fresh examples among runs that reached
        hits = {k: r.data.metrics["fresh_examples_to_target"] for k, r in runs.items()
                if k.startswith(f"r{rep['repeat']}-") and "fresh_examples_to_target" in r.data.metrics}
        if hits:
            assert rep["best"]["fresh_examples_to_target"] == min(hits.values())
            assert rep["best"]["mlflow_run_id"] == runs[rep["best"]["trial_key"]].info.run_id
        else:
            assert rep["best"] is None
    # tracking.register_model: the best trial's model (the fewest fresh examples to target)
    bests = [rep["best"] for rep in summary["repeats"] if rep["best"] is not None]
    versions = client.search_model_versions("name = 'search-best'")
    if bests:
        best = min(bests, key=lambda b: b["fresh_examples_to_target"])
        assert [v.run_id for v in versions] == [best["mlflow_run_id"]]
    else:
        assert not versions
    artifacts = {a.path for a in client.list_artifacts(parent_id)}
    assert {"summary.json", "trials.png"} <= artifacts
    # Tune's own trial logs: JSON and CSV (params.json is how a failed trial's point is
    # read back), no TensorBoard events, before and after the resume
    trial_dirs = sorted(p for p in (out / "tune").iterdir() if p.is_dir())
    assert len(trial_dirs) == TRIALS * REPEATS, [p.name for p in trial_dirs]
    for t in trial_dirs:  # a trial that diverged in its first epoch reported no row for the CSV
        files = {f.name for f in t.iterdir()}
        assert {"params.json", "result.json"} <= files and ("progress.csv" in files) != ("error.txt" in files), t
    assert not list((out / "tune").rglob("events.out.tfevents*"))
