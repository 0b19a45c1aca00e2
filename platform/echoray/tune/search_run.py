"""`echoray tune`: a repeated quasi-random search on Ray Tune under one MLflow parent run.

The folder holds `search.json` (the resolved pipeline, the parent run id: what
`--resume` needs), Tune's experiment state under `tune/`, and at the end
`summary.json` and `trials.png`, which are also artifacts of the parent run. With
train.storage_path these live in the search's home there instead (tune/search_storage.py),
and `--resume` takes that URI from any machine.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ray

from echoray.config import PipelineConfig
from echoray.config_load import ConfigError, flatten, validate
from echoray.data.sources import index_source
from echoray.data.text.run_files import share_tokenizer
from echoray.messages import say
from echoray.metrics import metric_named
from echoray.preflight import require_fits, resolve_gpu
from echoray.recovery.failures import describe_failure
from echoray.runtime.resources import plan_resources, shortfall
from echoray.runtime.session import start_ray
from echoray.storage.locations import runs_root
from echoray.summary import write_json_atomic
from echoray.tracking import RunLogger, check_reachable, tracking_uri
from echoray.tracking_datasets import log_datasets
from echoray.train.local_mode import fits_local_mode
from echoray.tune.mlflow_runs import (
    child_runs,
    end_unfinished_children,
    mark_failed,
    register_search_model,
)
from echoray.tune.outcome import ERROR, NOT_REACHED, REACHED, summarize
from echoray.tune.search_storage import (
    STATE_FILE,
    check_shared,
    open_search,
    publish,
    search_home,
    tune_storage,
)
from echoray.tune.space import SearchPoints
from echoray.tune.trial import trial_key, trial_tree

# The trial actor only drives Train; Tune refuses an empty resource request, so it asks
# for a little logical memory instead of a CPU share the trainers would then lack.
TRIAL_DRIVER_RESOURCES = {"cpu": 0, "memory": 256 * 2**20}
NO_AUTO_LOGGERS = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"


def warm_trial_resources(cfg: PipelineConfig) -> dict[str, float] | None:
    """What a trial actor asks for when its trainer runs in Ray Train's local mode, in the
    trial actor itself (train/local_mode.py): the train worker's share, which the trial then
    no longer asks of a worker group, so the plan (runtime/resources.py) and the concurrency
    it allows stay the same. None: each trial's trainer starts its own worker group
    (scaling.local_mode false, more than one worker, restarts, a GPU or custom worker
    resources)."""
    from echoray.runtime.placement import fit_placement

    cfg, _ = fit_placement(cfg)
    if cfg.scaling.local_mode is False or cfg.scaling.resources_per_worker or not fits_local_mode(cfg, resolve_gpu(cfg)):
        return None
    return {"cpu": cfg.scaling.cpus_per_worker, "memory": TRIAL_DRIVER_RESOURCES["memory"]}


class SearchInterrupted(KeyboardInterrupt):
    """A search (or study) stopped before every trial ended, by Ctrl-C or SIGTERM; its
    message names the command that resumes the folder."""


def search_dir(cfg: PipelineConfig, out: str | None) -> Path:
    d = Path(out) if out else runs_root() / f"{cfg.name}-search-{dt.datetime.now():%Y%m%d-%H%M%S-%f}"
    if (d / "summary.json").exists():
        raise ConfigError(f"--out {d}: already holds a finished search (summary.json); choose another folder")
    if (d / STATE_FILE).exists():
        raise ConfigError(f"--out {d}: holds an unfinished search; continue it with --resume {d}")
    return d


def trial_concurrency(cfg: PipelineConfig, local: bool) -> int:
    """search.max_concurrent, lowered to what the cluster can run at once."""
    from echoray.runtime.placement import fit_placement

    cfg, _ = fit_placement(cfg)  # what each trial will ask for on this cluster (run.train does the same)
    plan = plan_resources(cfg, resolve_gpu(cfg))
    demand = plan.demand()
    total = ray.cluster_resources()
    if local:
        require_fits(demand, "one trial", "; lower scaling.* or preprocess.actors.*", total)
    elif shortfall(demand, total):
        return 1  # a cluster may grow (autoscaler); run one at a time until it does
    fit = min(math.floor(total.get(k, 0.0) / v + 1e-9) for k, v in demand.items() if v > 0)
    return max(1, min(cfg.search.max_concurrent, fit))


def run_search(cfg: PipelineConfig | None, pipeline: str, out: str | None, t0: float, *,
               trials: int | None = None, repeats: int | None = None, resume: str | None = None,
               parent_run_id: str | None = None, tags: dict[str, str] | None = None) -> dict[str, Any]:
    if resume:
        d, state = open_search(resume, runs_root())
        cfg = validate(state["config"], origin=f"{resume.rstrip('/')}/{STATE_FILE}")
        pipeline, trials, repeats, home = state["pipeline"], state["trials"], state["repeats"], state.get("storage")
    else:
        d = search_dir(cfg, out)
        state, home = None, search_home(cfg.train.storage_path, d)
    try:
        points = SearchPoints(cfg.search, cfg.seed, trials, repeats)
    except ValueError as exc:
        raise ConfigError(f"{pipeline}: {exc}") from None
    idx = index_source(cfg.source)  # a missing or empty dataset fails here, before anything starts
    uri = state["tracking_uri"] if state else tracking_uri(cfg)
    check_reachable(uri)
    storage = tune_storage(home, d, cfg.train.store_retry_s(), new=state is None)  # a bad bucket or home: exit 2, before anything starts
    local = start_ray()
    check_shared(home, d, cfg.train.storage_shared)
    base = cfg.model_dump(mode="json")
    warm = warm_trial_resources(cfg)
    concurrency = trial_concurrency(cfg, local)
    logger = RunLogger(uri, cfg.tracking.experiment)

    if state:
        run_id = logger.run_id = state["parent_run_id"]
        logger.client.update_run(run_id, status="RUNNING")
        say(f"resuming search {d} (MLflow parent run {run_id})")
    else:
        base, run_id = _open_search(cfg, idx, d, base, (pipeline, uri, home), points, concurrency, logger,
                                    parent_run_id, tags)
    say(f"search {d}: {points.trials} trials x {points.repeats} repeats ({points.sequence}, "
        f"{len(points.space)} dims), {concurrency} at a time"
        f"{', each in its reused trial actor' if warm else ''}  |  MLflow parent run {run_id}")
    status = "FAILED"
    try:
        grid = _fit(d, points, base, pipeline, run_id, uri, concurrency, resume=bool(state),
                    warm=warm, storage=storage, runs_storage=home and f"{home}/trials")
        records, unfinished = _records(grid, base, points)
        _settle_runs(records, uri, run_id)
        if unfinished:
            raise SearchInterrupted(f"{unfinished} trial(s) unfinished; continue with: echoray tune --resume {home or d}")
        summary = _search_summary(cfg, pipeline, d, run_id, uri, points, concurrency, records, t0)
        _write_outputs(summary, d, home, cfg.train.store_retry_s(), logger)
        register_search_model(uri, summary, cfg.tracking.register_model)  # its best trial's model
        status = "FINISHED"
        return summary
    except SearchInterrupted:
        status = "KILLED"
        raise
    except KeyboardInterrupt as exc:  # SIGTERM (raised where the main thread was) or a second Ctrl-C
        status = "KILLED"
        raise SearchInterrupted(f"continue with: echoray tune --resume {home or d}") from exc
    finally:
        end_unfinished_children(uri, run_id, "KILLED")
        logger.end(status)


def _settle_runs(records: list[dict], uri: str, run_id: str) -> None:
    """Each record names its trial's MLflow run (a trial that failed never reported its run
    id; MLflow knows it), and an errored trial's run is FAILED (mlflow_runs.mark_failed)."""
    for rec in records:
        if rec["mlflow_run_id"] is None:
            found = child_runs(uri, run_id, rec["trial_key"])
            rec["mlflow_run_id"] = found[0].info.run_id if found else None
        if rec["status"] == ERROR and rec["mlflow_run_id"]:
            mark_failed(uri, rec["mlflow_run_id"])


def _open_search(cfg: PipelineConfig, idx, d: Path, base: dict, where: tuple, points: SearchPoints,
                 concurrency: int, logger: RunLogger, parent_run_id: str | None,
                 tags: dict[str, str] | None) -> tuple[dict, str]:
    """A new search: its folder, its MLflow parent run and its state file (what --resume reads).
    `where`: (pipeline, tracking URI, storage home). Returns (the trials' base tree, run id)."""
    pipeline, uri, home = where
    d.mkdir(parents=True, exist_ok=True)
    base = share_tokenizer(idx, base, d)  # a BPE trained here once, not once per trial
    params = {**flatten(cfg), "search.trials": str(points.trials), "search.repeats": str(points.repeats),
              "search.effective_concurrency": str(concurrency)}
    run_id = logger.start(run_name=d.name, params=params, parent_run_id=parent_run_id,
                          tags={"echoray.kind": "search", "echoray.pipeline": pipeline,
                                "echoray.run_dir": str(d.resolve()), **(tags or {})})
    # the search's data on its parent run, before any trial logs it: trials starting together
    # then find the dataset rows and insert none (tracking_datasets.log_datasets)
    log_datasets(logger.client, run_id, idx)
    write_json_atomic(d / STATE_FILE, {
        "pipeline": pipeline, "config": base, "trials": points.trials, "repeats": points.repeats,
        "parent_run_id": run_id, "tracking_uri": uri, "storage": home})
    publish(home, cfg.train.store_retry_s(), d / STATE_FILE)
    return base, run_id


def _search_summary(cfg: PipelineConfig, pipeline: str, d: Path, run_id: str, uri: str, points: SearchPoints,
                    concurrency: int, records: list[dict], t0: float) -> dict[str, Any]:
    """The search's summary.json: where it is, what it searched, and the best trials' fresh
    examples to target per repeat (tune/outcome.py summarize)."""
    return {
        "pipeline": pipeline, "search_dir": str(d.resolve()), "mlflow_parent_run_id": run_id,
        "mlflow_tracking_uri": uri, "objective": "fresh_examples_to_target",
        "target": {"metric": cfg.train.metric, "value": cfg.train.target,
                   "direction": metric_named(cfg.train.metric).direction},
        "trials_per_repeat": points.trials, "sequence": points.sequence,
        "scramble_seeds": [points.scramble_seed(r) for r in range(points.repeats)],
        "space": {k: v.model_dump(mode="json") for k, v in points.space.items()},
        "concurrency": concurrency,
        **summarize(records, points.repeats),
        "trials": records, "wall_s": time.time() - t0,
    }


def _write_outputs(summary: dict[str, Any], d: Path, home: str | None, retry_s: float, logger: RunLogger) -> None:
    """summary.json and the trials plot, to the search folder, MLflow and the search's home
    in the object store (if it has one); the best-trial figures as the parent run's metrics."""
    write_json_atomic(d / "summary.json", summary)
    logger.log_file(d / "summary.json")
    from echoray.tune.plots import plot_trials

    plot_trials(summary, d / "trials.png")
    logger.log_file(d / "trials.png")
    publish(home, retry_s, d / "summary.json", d / "trials.png")
    fe = summary["fresh_examples_to_target"]
    if fe["n"]:
        logger.log_metrics({"best_fresh_examples_to_target_mean": fe["mean"],
                            "best_fresh_examples_to_target_min": fe["min"],
                            "best_fresh_examples_to_target_max": fe["max"]}, step=0)


def _fit(d: Path, points: SearchPoints, base: dict, pipeline: str, parent_run_id: str, uri: str,
         concurrency: int, resume: bool, warm: dict[str, float] | None = None,
         storage: tuple[str, Any] | None = None, runs_storage: str | None = None):
    """`warm`: the trial actor's resources where each trial's trainer runs in local mode in
    it (warm_trial_resources; None: each trial starts a worker group).
    `storage`: tune_storage's (path, filesystem) for Tune's experiment (None: the folder d);
    `runs_storage`: where the trials' run folders and checkpoints go (None: d/trials only)."""
    from ray import tune

    from echoray.tune.progress import TrialLines, search_bar
    from echoray.tune.searcher import QuasiRandomSearcher
    from echoray.tune.trial import run_trial

    trainable = tune.with_resources(
        tune.with_parameters(run_trial, base=base, pipeline=pipeline, parent_run_id=parent_run_id,
                             tracking_uri=uri, runs_dir=str((d / "trials").resolve()), local_mode=warm is not None,
                             runs_storage=runs_storage),
        warm or TRIAL_DRIVER_RESOURCES)
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    path, fs = storage or (str(d.resolve()), None)
    if resume:  # with the loggers the search started with: Tune restores its RunConfig
        tuner = tune.Tuner.restore(f"{path}/tune", trainable=trainable, storage_filesystem=fs,
                                   resume_unfinished=True, resume_errored=False, restart_errored=False)
    else:
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(search_alg=QuasiRandomSearcher(points), num_samples=len(points),
                                        max_concurrent_trials=concurrency, reuse_actors=True),
            run_config=tune.RunConfig(name="tune", storage_path=path, storage_filesystem=fs, verbose=0,
                                      callbacks=[TrialLines(len(points)), JsonLoggerCallback(), CSVLoggerCallback()]),
        )
    with _tune_env(), search_bar(len(points)):  # a bar on a terminal only
        return tuner.fit()


@contextmanager
def _tune_env():
    """While a search runs, two of Tune's documented environment switches, read when the
    search starts and put back as they were after:
    - TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1: Tune adds none of its own trial loggers, so a
      trial's folder has the JSON and CSV logs the search passes (params.json is what
      _trial_params reads back) and no TensorBoard events, whose logger imports tensorboardX
      in the search's process (2.2 CPU-seconds, measured after ray.tune; the metrics are in
      MLflow). A search begun before the search passed its loggers and resumed now writes
      no params.json for the trials it reruns; one that then fails before its first report
      counts as unfinished (_trial_params), as one interrupted before Tune wrote the file
      always has.
    - RAY_AIR_NEW_OUTPUT=0: Tune's output engine that `verbose=0` silences. The newer one
      prints its configuration table and a block per failed trial whatever the verbosity;
      the console carries echoray's trial lines (tune/progress.py) instead."""
    switches = {NO_AUTO_LOGGERS: "1", "RAY_AIR_NEW_OUTPUT": "0"}
    old = {k: os.environ.get(k) for k in switches}
    os.environ.update(switches)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _records(grid, base: dict, points: SearchPoints) -> tuple[list[dict[str, Any]], int]:
    records, unfinished = [], len(points) - len(grid)
    for result in grid:
        point, m = result.config or _trial_params(result), result.metrics or {}
        if point is None:  # interrupted before it started: it runs on --resume
            unfinished += 1
            continue
        rec = {"trial_key": trial_key(point["repeat"], point["index"]), "repeat": point["repeat"],
               "index": point["index"], "params": point["params"],
               "seed": trial_tree(base, point)["seed"],
               "fresh_examples_to_target": m.get("fresh_examples_to_target"),
               "steps_to_target": m.get("steps_to_target"), "best_accuracy": m.get("best_accuracy"),
               "best_metric": m.get("best_metric", m.get("best_accuracy")),
               "fresh_examples": m.get("fresh_examples"), "epochs": m.get("epoch"),
               "evaluations": m.get("evaluations"),
               "mlflow_run_id": m.get("mlflow_run_id"), "error": None}
        if result.error is not None:
            rec["status"], rec["error"] = ERROR, describe_failure(result.error)[:500]
        elif m.get("final"):
            rec["status"] = REACHED if m.get("target_reached") else NOT_REACHED
        else:
            unfinished += 1
            continue
        records.append(rec)
    return sorted(records, key=lambda r: (r["repeat"], r["index"])), unfinished


def _trial_params(result) -> dict[str, Any] | None:
    """A restored trial that failed before its first report has no config in its Result;
    Tune wrote it to params.json (in the experiment's storage) when the trial started.
    None where it has none: a search interrupted in the second between Tune making a
    trial's folder and the trial writing params.json (seen in test_tune_search.py: the
    Ctrl-C came 2 s after a trial's folder was made, and the search exited 1 on the
    missing file instead of 130 with its resume command)."""
    try:
        with result.filesystem.open_input_stream(f"{result.path}/params.json") as f:
            return json.loads(f.read())
    except FileNotFoundError:
        return None
