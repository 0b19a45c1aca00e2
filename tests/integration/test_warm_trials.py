"""Warm search trials (Ray Train local mode): a one-worker run trained inside a long-lived
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
from test_train_pipeline import assert_final_model

from echoray.config_load import load_config
from echoray.data.sources import index_source
from echoray.tune.search_run import TRIAL_DRIVER_RESOURCES, warm_trial_resources
from helpers import wait_for

SEARCH = Path(__file__).parents[2] / "pipelines" / "digits_search.yaml"
SMALL = ["train.max_epochs=2", "train.target=null", "audit.enabled=true", "train.batch_size=32",
         "source.limit=320", "echo.stage=before_augment", "echo.factor=2"]


cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/


@ray.remote(num_cpus=0.5)
class TrialActor:
    """Stands for a Tune trial actor: one process, several runs in turn."""

    def run(self, overrides: list[str], out: str, parent_run_id: str) -> tuple[dict, int]:
        """The run's summary and this process's pid."""
        import os

        from echoray.run import RunHooks, train

        cfg = load_config(None, overrides)
        hooks = RunHooks(parent_run_id=parent_run_id, local_mode=True, tags={"echoray.trial_key": out[-2:]})
        return train(cfg, "embedded:digits", out, time.time(), hooks=hooks), os.getpid()


def rows(audit) -> set[tuple[int, int, int]]:
    t = audit.to_pydict()
    return set(zip(t["epoch"], t["sample_id"], t["aug_key"], strict=True))


def actors(class_name: str, state: str | None = None) -> int:
    """Actors of the class Ray has records of (dead ones too unless `state`)."""
    filters = [("class_name", "=", class_name)] + ([("state", "=", state)] if state else [])
    return len(list_actors(address=ray.get_runtime_context().gcs_address, filters=filters, limit=10000))


def alive(class_name: str) -> int:
    return actors(class_name, "ALIVE")


def test_two_runs_in_one_actor_match_a_ray_train_run_and_leave_nothing_behind(
        run_pipeline, sqlite_uri, tmp_path):
    overrides = [f"tracking.uri={sqlite_uri}", *SMALL]
    reference, ref_audit = run_pipeline(None, *SMALL, name="ray-train")  # the Ray Train path
    client = MlflowClient(sqlite_uri)
    exp = client.get_experiment_by_name("echoray").experiment_id
    parent = client.create_run(exp).info.run_id
    train_workers, trial_actors = actors("RayTrainWorker"), actors("TrialActor")
    collectors = alive("RunCollector")  # the session's earlier tests' runs, if any still live
    actor = TrialActor.remote()
    first, pid0 = ray.get(actor.run.remote(overrides, str(tmp_path / "t0"), parent))
    second, pid1 = ray.get(actor.run.remote(overrides, str(tmp_path / "t1"), parent))

    train_ids = index_source(load_config(None, overrides).source).train_ids
    for s, name in ((first, "t0"), (second, "t1")):
        audit = pq.read_table(tmp_path / name / "audit.parquet")
        # echo before augmentation, e = 2: 320 fresh ids per epoch, each trained twice
        assert s["fresh_examples"] == 640 and s["trained_examples"] == 1280 == audit.num_rows
        assert (s["steps"], s["epochs"], s["evaluations"]) == (reference["steps"], reference["epochs"],
                                                                reference["evaluations"]) == (40, 2, 2)
        assert rows(audit) == rows(ref_audit)  # same reads, echo copies and augmentation keys
        t = audit.to_pydict()
        for e in range(2):
            per_id = Counter(sid for sid, ep in zip(t["sample_id"], t["epoch"], strict=True) if ep == e)
            assert set(per_id) == set(train_ids.tolist()) and set(per_id.values()) == {2}
        assert set(Counter(t["step"]).values()) == {32}
        run = client.get_run(s["mlflow_run_id"])
        assert run.info.status == "FINISHED" and run.data.tags["mlflow.parentRunId"] == parent
        assert [m.step for m in client.get_metric_history(run.info.run_id, "accuracy")] == [
            h["step"] for h in s["history"]]
        assert_final_model(client, run.info.run_id, 2)  # a warm trial keeps no checkpoint, logs its model
    assert first["mlflow_run_id"] != second["mlflow_run_id"]
    # Warm: both runs trained in the one trial actor's process, started once, and neither
    # started a Ray Train worker (what would make a trial cold: a new process, torch imported
    # again). The first-step times this saves are measured in benchmarks/tune_overhead.py.
    assert pid0 == pid1 and actors("TrialActor") == trial_actors + 1
    assert actors("RayTrainWorker") == train_workers
    wait_for(lambda: alive("RunCollector") <= collectors, "the runs' collectors to exit", timeout_s=60)
    wait_for(lambda: alive("MapWorker(MapBatches(Preprocess))") == 0, "the preprocessing actors to exit", timeout_s=60)
    ray.kill(actor)


def test_warm_trials_ask_for_the_train_workers_share_and_only_when_nothing_else_is_needed(local_ray):
    cfg = load_config(SEARCH, ["scaling.use_gpu=false"])
    assert warm_trial_resources(cfg) == {"cpu": 0.5, "memory": TRIAL_DRIVER_RESOURCES["memory"]}
    for off in ("scaling.local_mode=false", "scaling.num_workers=2", "scaling.max_failures=1"):
        assert warm_trial_resources(load_config(SEARCH, ["scaling.use_gpu=false", off])) is None, off
