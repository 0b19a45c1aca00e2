"""One short run through the Python API on the shared local Ray: the summary comes back,
Ray is left up, progress lines and live_* metrics come at train.log_every_s, and the
experiment opens in MLflow's model-training view."""

import json

import ray
from mlflow.tracking import MlflowClient

import echoray.api
from helpers import REPO

# Training that lasts seconds whatever the CPU: reads take 10 ms each, one at a time, so
# the 512 reads take >= 5 s (ten heartbeats), and the steps, faster, wait for them once the
# worker has taken what was read while it started. Unpaced by the store, 16 digits steps can end
# inside one heartbeat (train/loop.py HEARTBEAT_S 0.5 s) and no line is printed.
SLOW_READS = {"source.kind": "slow_store:SlowStore",
              "source.options": {"inner": "digits", "latency_ms": 10, "read_concurrency": 1},
              "echo.shuffle_buffer": 128, "preprocess.batch_size": 64}


def test_api_train_returns_the_summary_and_logs_progress(local_ray, tmp_path, sqlite_uri, capsys):
    out = tmp_path / "run"
    summary = echoray.api.train(REPO / "pipelines" / "digits.yaml", overrides={
        "tracking.uri": sqlite_uri, "tracking.experiment": "api", "source.limit": 256, "train.max_epochs": 2,
        "train.target": None, "train.log_every_s": 0.2, **SLOW_READS}, out=out)
    assert ray.is_initialized()  # the caller's Ray is left as found
    assert summary == json.loads((out / "summary.json").read_text())
    assert summary["fresh_examples"] == summary["trained_examples"] == 2 * (256 // 64) * 64
    printed = capsys.readouterr().out
    live = [line for line in printed.splitlines() if " ex/s " in line]
    assert len(live) >= 2, printed[-3000:]
    assert all("epoch ETA" in line and "echo 1.00" in line for line in live)
    assert f"mlflow ui --backend-store-uri {sqlite_uri}   (then open http://127.0.0.1:5000/#/experiments/" in printed

    client = MlflowClient(sqlite_uri)
    exp = client.get_experiment_by_name("api")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    assert exp.experiment_id == summary["mlflow_experiment_id"]
    run_id = summary["mlflow_run_id"]
    steps = [m.step for m in client.get_metric_history(run_id, "live_trained_examples")]
    assert len(steps) == len(live) and steps == sorted(steps) and all(1 <= s <= 8 for s in steps)
    assert {a.path for a in client.list_artifacts(run_id)} >= {"config.yaml", "summary.json"}
    assert client.get_run(run_id).info.artifact_uri == summary["mlflow_artifact_uri"]
