"""One Tune trial = one `echoray train` run of the pipeline at one search point.

Runs inside a Tune trial actor: it fits the run's Ray Train V2 trainer (through run.train),
in local mode in the actor itself for a warm trial (train/local_mode.py), and reports every
evaluation to Tune (`epoch`: the passes of fresh data it fell at, `evaluation`: its index). The MLflow run is a child of the search's parent run, tagged with the
trial's (repeat, index) so a resumed search can find and discard a partial attempt.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

from echoray.seeds import derive_seed

STREAM_TRIAL_SEED = 8


def trial_key(repeat: int, index: int) -> str:
    return f"r{repeat}-t{index}"


def set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    node = tree
    *parents, leaf = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value


def trial_tree(base: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    """The pipeline tree of one trial: the search point's values, and a training
    seed per repeat (every trial of a repeat trains with the same seed)."""
    tree = copy.deepcopy(base)
    for key, value in point["params"].items():
        set_dotted(tree, key, value)
    tree["seed"] = derive_seed(int(base.get("seed", 0)), STREAM_TRIAL_SEED, point["repeat"]) % (2**31)
    return tree


def run_trial(point: dict[str, Any], *, base: dict[str, Any], pipeline: str, parent_run_id: str,
              tracking_uri: str, runs_dir: str, local_mode: bool = False, runs_storage: str | None = None) -> None:
    """`local_mode`: the trial's trainer runs in Ray Train's local mode, in this trial actor
    (a warm trial: tune/search_run.py warm_trial_resources).
    `runs_storage`: the search's trials/ in train.storage_path (tune/search_storage.py): the
    trial's checkpoints go there, and its run folder is copied there when it ends."""
    from ray import tune

    from echoray.config_load import validate
    from echoray.run import RunHooks, train
    from echoray.tune.mlflow_runs import discard_partial_attempts, finished_attempt

    key = trial_key(point["repeat"], point["index"])
    t0 = time.time()
    tree = trial_tree(base, point)
    tree.setdefault("tracking", {})["uri"] = tracking_uri
    if runs_storage:
        tree.setdefault("train", {})["storage_path"] = runs_storage
    cfg = validate(tree, origin=f"trial {key}")
    earlier = finished_attempt(tracking_uri, parent_run_id, key)
    if earlier is not None:
        tune.report(final_report(earlier))
        return
    discard_partial_attempts(tracking_uri, parent_run_id, key)

    def report_epoch(ev: dict) -> None:
        scored = {k: ev[k] for k in ("accuracy", "bits_per_byte", "perplexity", "metric") if ev.get(k) is not None}
        tune.report({"epoch": ev["data_epochs"], "evaluation": ev["epoch"], **scored, "loss": ev["loss"],
                     "fresh_examples": ev["fresh_examples"], "trained_examples": ev["trained_examples"],
                     "final": False})

    # A rerun after an interrupt starts over in a fresh folder (the earlier one is partial).
    out = Path(runs_dir) / f"{key}-{tune.get_context().get_trial_id()}-{int(t0)}"
    hooks = RunHooks(
        parent_run_id=parent_run_id, run_name=f"{cfg.name}-{key}", on_epoch=report_epoch, local_mode=local_mode,
        tags={"echoray.trial_key": key, "echoray.repeat": str(point["repeat"]),
              "echoray.trial_index": str(point["index"])},
    )
    from echoray.tune.search_storage import upload_run

    try:
        summary = train(cfg, pipeline, str(out), t0, hooks=hooks)
    finally:
        upload_run(runs_storage, out, cfg.train.store_retry_s())
    tune.report(final_report(summary))


def final_report(s: dict[str, Any]) -> dict[str, Any]:
    """A trial's last Tune result, from its run's summary.json."""
    return {
        "epoch": s["epochs"], "evaluations": s.get("evaluations"),  # absent from summaries before it existed
        "metric_name": s["metric"]["name"], "metric": s["metric"]["value"],
        "best_metric": s["best_metric"],  # of train.metric, in its direction (echoray/metrics.py)
        **({"accuracy": s["metric"]["value"], "best_accuracy": s["best_metric"]}
           if s["metric"]["name"] == "accuracy" else {}),
        "fresh_examples": s["fresh_examples"], "trained_examples": s["trained_examples"],
        "target_reached": s["target_reached"], "fresh_examples_to_target": s["fresh_examples_to_target"],
        "steps_to_target": s["steps_to_target"], "wall_s": s["wall_s"],
        "mlflow_run_id": s["mlflow_run_id"], "final": True,
    }
