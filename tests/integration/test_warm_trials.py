"""Warm search trials (train/in_process.py): a one-worker run trained inside a long-lived
Ray actor, as a reused Tune trial actor does. Two runs in one actor keep the exact
accounting of a Ray Train run of the same config (the same (epoch, sample, augmentation
key) rows, every id once per epoch), their own MLflow runs under a parent, and leave no
collector or preprocessing actor behind."""

import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import ray
from mlflow.tracking import MlflowClient
from ray import cloudpickle
from ray.util.state import list_actors

from echoray.config_load import load_config
from echoray.data.sources import index_source
from echoray.tune.search_run import TRIAL_DRIVER_RESOURCES, warm_trial_resources

SEARCH = Path(__file__).parents[2] / "pipelines" / "digits_search.yaml"
SMALL = ["train.max_epochs=2", "train.target=null", "audit.enabled=true", "train.batch_size=32",
         "source.limit=320", "echo.stage=before_augment", "echo.factor=2"]


cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/


@ray.remote(num_cpus=0.5)
class TrialActor:
    """Stands for a Tune trial actor: one process, several runs in turn."""

    def run(self, overrides: list[str], out: str, parent_run_id: str) -> dict:
        from echoray.run import RunHooks, train

        cfg = load_config(None, overrides)
        hooks = RunHooks(parent_run_id=parent_run_id, in_process=True, tags={"echoray.trial_key": out[-2:]})
        return train(cfg, "embedded:digits", out, time.time(), hooks=hooks)


def rows(audit) -> set[tuple[int, int, int]]:
    t = audit.to_pydict()
    return set(zip(t["epoch"], t["sample_id"], t["aug_key"], strict=True))


def alive(class_name: str) -> int:
    return len(list_actors(address=ray.get_runtime_context().gcs_address,
                           filters=[("class_name", "=", class_name), ("state", "=", "ALIVE")]))


def test_two_runs_in_one_actor_match_a_ray_train_run_and_leave_nothing_behind(
        run_pipeline, sqlite_uri, tmp_path):
    overrides = [f"tracking.uri={sqlite_uri}", *SMALL]
    reference, ref_audit = run_pipeline(None, *SMALL, name="ray-train")  # the Ray Train path
    client = MlflowClient(sqlite_uri)
    exp = client.get_experiment_by_name("echoray").experiment_id
    parent = client.create_run(exp).info.run_id
    actor = TrialActor.remote()
    first = ray.get(actor.run.remote(overrides, str(tmp_path / "t0"), parent))
    second = ray.get(actor.run.remote(overrides, str(tmp_path / "t1"), parent))

    train_ids = index_source(load_config(None, overrides).source).train_ids
    for s, name in ((first, "t0"), (second, "t1")):
        audit = pq.read_table(tmp_path / name / "audit.parquet")
        # echo before augmentation, e = 2: 320 fresh ids per epoch, each trained twice
        assert s["fresh_examples"] == 640 and s["trained_examples"] == 1280 == audit.num_rows
        assert (s["steps"], s["epochs"]) == (reference["steps"], reference["epochs"]) == (40, 2)
        assert rows(audit) == rows(ref_audit)  # same reads, echo copies and augmentation keys
        t = audit.to_pydict()
        for e in range(2):
            per_id = Counter(sid for sid, ep in zip(t["sample_id"], t["epoch"], strict=True) if ep == e)
            assert set(per_id) == set(train_ids.tolist()) and set(per_id.values()) == {2}
        assert set(Counter(t["step"]).values()) == {32}
        run = client.get_run(s["mlflow_run_id"])
        assert run.info.status == "FINISHED" and run.data.tags["mlflow.parentRunId"] == parent
        assert [m.step for m in client.get_metric_history(run.info.run_id, "accuracy")] == [1, 2]
    assert first["mlflow_run_id"] != second["mlflow_run_id"]
    assert second["time_to_first_step_s"] < first["time_to_first_step_s"]  # torch and the loop are warm
    time.sleep(1.0)  # ray.kill and the stream's shutdown are asynchronous
    assert alive("RunCollector") == 0
    assert alive("MapWorker(MapBatches(Preprocess))") == 0
    ray.kill(actor)


def test_warm_trials_ask_for_the_train_workers_share_and_only_when_nothing_else_is_needed(local_ray):
    cfg = load_config(SEARCH, ["scaling.use_gpu=false"])
    assert warm_trial_resources(cfg) == {"cpu": 0.5, "memory": TRIAL_DRIVER_RESOURCES["memory"]}
    for off in ("search.warm_trials=false", "scaling.num_workers=2", "scaling.max_failures=1"):
        assert warm_trial_resources(load_config(SEARCH, ["scaling.use_gpu=false", off])) is None, off
