"""`echoray train`: validate, index, start Ray and MLflow, fit, write the summary.

Order matters for the error contract: everything that can be wrong with the
input (config, dataset paths, resource plan) is checked before a run folder,
an MLflow run or a Ray job exists (echoray/preflight.py). What the run prints is
echoray/messages.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from echoray.config import PipelineConfig
from echoray.config_load import ConfigError, flatten, to_yaml
from echoray.data.sources import SourceError, SourceIndex, index_source
from echoray.data.sources.file_table import publish_index
from echoray.data.text.run_files import (
    LM_EPOCH_KEYS,
    resumed_tokenizer,
    save_tokenizer,
    text_summary,
)
from echoray.driver.monitor import (
    CollectorLost,
    StallError,
    abandon_fits,
    join_fit,
    stop_training,
    watch_fit,
)
from echoray.messages import epoch_line, quiet_console, say, say_console_log, say_start
from echoray.preflight import fit_cluster, new_run_dir, storage_checked
from echoray.recovery.resume import Resume, backfill, find_checkpoint, write_run_state
from echoray.runtime.collector import RunCollector
from echoray.runtime.epoch_bar import EpochBar, epoch_bar
from echoray.runtime.node_metrics import node_tracking
from echoray.runtime.progress import EpochClock, LiveProgress, progress_line, progress_metrics
from echoray.runtime.session import start_ray
from echoray.storage.fs import checkpoint_location, is_uri, open_location
from echoray.summary import build_summary, fault_summary, write_json_atomic
from echoray.tracking import RunLogger, check_reachable, tracking_uri
from echoray.tracking_datasets import log_datasets
from echoray.tracking_model import log_trained_model
from echoray.train.local_fit import local_config
from echoray.train.local_mode import fits_local_mode

# How long an interrupted run waits for its training thread to reach a step boundary
# (a step, an evaluation or a checkpoint write in progress finishes first). Not waited
# for a stalled worker group that has no controller to abort (_end_collector).
FIT_JOIN_S = 60.0


@dataclass
class RunHooks:
    """What a caller other than the CLI (a Tune trial) adds to a run."""

    parent_run_id: str | None = None  # MLflow: nest this run under a search
    run_name: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    on_epoch: Callable[[dict], None] | None = None  # after each epoch's event is logged
    local_mode: bool = False  # train in Ray Train's local mode where the run fits it: a warm trial


def epoch_clock(cfg: PipelineConfig, n_train: int) -> EpochClock:
    """The run's epochs (passes of fresh data) as the driver's live lines count them; the
    stream's last partial batch is one per reading worker group (train/groups.py): at most
    one per reader of the largest group (an elastic scaling.num_workers' max)."""
    from echoray.train.groups import rank_layout

    ba = cfg.batch_augmentation
    readers = rank_layout(0, cfg.scaling.max_workers, ba.copies, ba.mode).readers
    return EpochClock(n_train, max_epochs=cfg.train.max_epochs, last_batch=readers * cfg.train.batch_size)


def on_this_node() -> NodeAffinitySchedulingStrategy:
    """The driver's node, for the run's collector: it holds the run's live state, so it should
    be lost only with the driver, never with a (spot) worker node (docs/how-to/resume.md)."""
    return NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)


def history_row(ev: dict) -> dict:
    """An evaluation event as summary.json's history keeps it: its index (`evaluation`),
    the epoch it fell at (passes of fresh data, fractional), what it measured."""
    row = {"evaluation": ev["epoch"], "epoch": ev.get("data_epochs"),
           **{k: ev.get(k) for k in ("step", "loss", "accuracy", "accuracy_tta", "fresh_examples",
                                     "trained_examples", "train_s", "wait_fraction")}}
    return {**row, **{k: ev[k] for k in LM_EPOCH_KEYS if ev.get(k) is not None}}


def write_audit(collector, path: Path, earlier: list | None = None) -> int:
    parts = (earlier or []) + ray.get(collector.take_audit.remote())
    if not parts:
        return 0
    table = pa.concat_tables([pa.table(p) for p in parts])
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)
    return table.num_rows


@dataclass
class _Site:
    """What a run found out before its MLflow run opens: the validated input, where its
    files and checkpoints go, the Ray it runs on and how it trains there."""

    cfg: PipelineConfig
    idx: SourceIndex
    run_dir: Path
    storage: str
    uri: str
    plan: Any
    use_gpu: bool
    local_mode: bool
    logger: RunLogger
    build_trainer: Callable


def _start(cfg: PipelineConfig, out: str | None, resume: Resume | None, hooks: RunHooks) -> _Site:
    """Everything that can be wrong with the input is checked before Ray starts; then Ray,
    the cluster's placement, and (overlapped with Ray's start: MLflow's first open of a
    sqlite store migrates its schema, torch and Ray Train take seconds to import) MLflow."""
    cfg = resumed_tokenizer(cfg, resume.run_dir if resume else None)
    idx: SourceIndex = index_source(cfg.source, cfg.train.store_retry_s())
    if idx.reader and (idx.kind == "text") != (cfg.model.name == "transformer_lm"):
        raise SourceError(f"source.kind {idx.reader!r}: its reader serves {'text' if idx.kind == 'text' else 'images'}, "
                          f"which model.name {cfg.model.name!r} does not train on")
    uri = tracking_uri(cfg)
    check_reachable(uri)
    run_dir = resume.run_dir if resume else new_run_dir(cfg, out)
    storage = resume.storage if resume else checkpoint_location(cfg.train.storage_path, run_dir)
    if is_uri(storage) and not resume:  # a missing bucket, bad credentials: before anything starts
        storage_checked(open_location, storage, "train.storage_path")
    box: dict[str, Any] = {}
    warmup = threading.Thread(target=_warm_up, args=(uri, cfg.tracking.experiment, box), daemon=True)
    warmup.start()
    try:
        local = start_ray()
        idx = publish_index(idx)  # file lists once in the object store, not pickled per actor/worker
        cfg, use_gpu, plan = fit_cluster(cfg, storage, local, len(idx.train_ids))
        local_mode = choose_local_mode(cfg, use_gpu, local, hooks, resume)
    finally:
        # also on bad input (a plan the cluster cannot fit: exit 2): a process that left while
        # the warm-up migrated a new sqlite store's schema left it half-migrated
        warmup.join()
    if "error" in box:
        raise box["error"]
    return _Site(cfg, idx, run_dir, storage, uri, plan, use_gpu, local_mode, box["logger"], box["build_trainer"])


def train(cfg: PipelineConfig, pipeline: str, out: str | None, t0: float,
          resume: Resume | None = None, hooks: RunHooks | None = None) -> dict[str, Any]:
    """One run: checks, Ray, the MLflow run, the fit watched to its end, summary.json."""
    hooks = hooks or RunHooks()
    quiet = quiet_console()
    site = _start(cfg, out, resume, hooks)
    # Imported once _start's warm-up thread has imported the trainer (torch, Ray Train):
    # importing it here first made the main thread wait for that import before Ray started.
    from echoray.train.trainer import TRAIN_RUN_NAME
    cfg, idx, run_dir, logger = site.cfg, site.idx, site.run_dir, site.logger
    pipeline, t0, run_id = _open_mlflow_run(cfg, logger, run_dir, pipeline, t0, resume, hooks, TRAIN_RUN_NAME)
    log_datasets(logger.client, run_id, idx)  # MLflow dataset inputs: training, evaluation
    write_run_state(run_dir, mlflow_run_id=run_id, tracking_uri=site.uri, pipeline=pipeline, started_at=t0,
                    storage=site.storage, resumes=resume.resumes if resume else None,
                    trainer="local_mode" if site.local_mode else "ray_train")
    say_start(cfg, idx, run_dir, run_id, site.use_gpu, site.local_mode and not hooks.local_mode)
    if quiet:
        say_console_log(run_dir)
    if (tok := save_tokenizer(idx, run_dir)) is not None and not resume:
        logger.log_file(tok)
    return _fit(site, resume, hooks, (pipeline, run_id, site.uri, t0))


def _fit(site: _Site, resume: Resume | None, hooks: RunHooks, where: tuple) -> dict[str, Any]:
    """The fit, watched by the driver until it ends; the summary. Whatever ends it, what
    still trains is stopped and the MLflow run ends with its status."""
    cfg, idx = site.cfg, site.idx
    # a search trial in local mode keeps none (it is rerun whole after an interrupt)
    keeps_checkpoints = cfg.train.checkpoint_every > 0 and not (site.local_mode and hooks.local_mode)
    status, collector, stalled = "FAILED", None, False
    try:
        collector = RunCollector.options(scheduling_strategy=on_this_node()).remote(
            # epochs are final once a checkpoint covers them (a restart or resume replays the rest)
            cfg.echo.factor, cfg.echo.max_factor, checkpointed=keeps_checkpoints,
            n_train=len(idx.train_ids), max_bad_fraction=cfg.source.max_bad_fraction,
            resume=resume.collector_seed() if resume else None)
        local_fit = (local_config(cfg, site.storage, keeps_checkpoints, resume.checkpoint if resume else None)
                     if site.local_mode else None)
        nodes = node_tracking(site.uri, site.logger.run_id, ray.get_runtime_context().get_node_id())
        fit = site.build_trainer(cfg, idx, site.plan, site.use_gpu, collector, site.storage, local=local_fit,
                                 tracking=nodes).fit
        clock = epoch_clock(cfg, len(idx.train_ids))
        events = _RunEvents(site.logger, hooks, resume, idx, clock, cfg.train.log_every_s)
        with epoch_bar(clock) as events.bar:  # on a terminal only
            collected = watch_fit(fit, collector, site.plan, cfg.train.stall_timeout_s, events.on_event,
                                  events.on_factor, on_restart=events.on_restart,
                                  final_since=resume.epoch if resume else 0,
                                  on_progress=lambda ev: say(epoch_line(ev)), on_tick=events.on_tick)
        summary = _finish(cfg, idx, collector, site.logger, site.run_dir, resume, collected, events, where)
        status = "FINISHED"
        return summary
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C, Tune stopping a trial
        status = "KILLED"
        say(f"interrupted; continue with: echoray train --resume {site.run_dir}")
        raise
    except StallError:
        stalled = True
        raise
    except CollectorLost:  # its live state is gone; the checkpoints are not (exit 1)
        say(f"the run's collector actor was lost; continue with: echoray train --resume {site.run_dir}")
        raise
    finally:
        _end_collector(collector, status, site.local_mode, stalled)
        site.logger.end(status)


class _RunEvents:
    """What the driver does with the collector's events: final evaluations go to the history,
    to MLflow and to hooks.on_epoch (a final evaluation is never replayed); echo.factor:
    auto's factor points, worker-group restarts and live progress lines are logged and said.
    Every MLflow metric of the run is logged at the optimizer step it describes (an
    evaluation's `step`, a heartbeat's, the run's last for its summary figures), and each
    evaluation logs `epoch`, the passes of fresh data it fell at (docs/concepts.md, "MLflow
    metrics"). A resumed run starts its history with the evaluations before its checkpoint and
    logs those the dead driver had not logged; an evaluation after the checkpoint that the
    dead driver had logged (its checkpoint write failed, or the driver died before the write)
    is trained again, at the same step, and not logged twice: MLflow keeps one point per step
    (the replay makes it equal)."""

    def __init__(self, logger: RunLogger, hooks: RunHooks, resume: Resume | None, idx: SourceIndex,
                 clock: EpochClock, log_every_s: float):
        self.logger, self.hooks = logger, hooks
        self.live = LiveProgress(clock, log_every_s, self.on_live)  # progress lines between evaluations
        self.bar: EpochBar | None = None  # on a terminal (runtime/epoch_bar.py), in place of the lines
        self.history: list[dict] = []
        self.factor_points: list[dict] = []
        self.logged_before: set[int] = set()  # optimizer steps with an evaluation in MLflow
        self.step = 0  # the workers' optimizer steps at the latest poll
        if resume:
            self.history.extend(history_row(ev) for ev in resume.history)
            self.logged_before = logger.logged_steps("loss" if idx.kind == "text" else "accuracy")
            backfill(resume, self.logged_before, self.log_epoch)

    def log_epoch(self, ev: dict) -> None:
        self.logger.log_metrics({**{k: ev.get(k) for k in (
            "accuracy", "accuracy_tta", "loss", "lr", "fresh_examples", "trained_examples",
            "duplicate_batch_fraction", "wait_fraction", *LM_EPOCH_KEYS)},
            "epoch": ev.get("data_epochs"), "evaluation": ev["epoch"]}, step=ev["step"])

    def on_event(self, ev: dict) -> None:
        self.history.append(history_row(ev))
        if ev["step"] not in self.logged_before:
            self.log_epoch(ev)
        if self.hooks.on_epoch:
            self.hooks.on_epoch(ev)

    def on_tick(self, tick: dict | None, echo_factor: float) -> None:  # every poll of the collector
        if tick is not None:
            self.step = tick["steps"]
        if self.bar is not None:
            self.bar.show(tick)
        self.live(tick, echo_factor)

    def on_factor(self, point: dict) -> None:
        self.factor_points.append(point)
        self.logger.log_metrics({"echo_factor": point["factor"], "echo_measured_R": point["measured_R"]},
                                step=self.step)

    @staticmethod
    def on_restart(r: dict) -> None:
        if r["kind"] == "restart":
            say(f"a worker failed: worker group restarted from the checkpoint of evaluation {r['from_epoch']}")

    def on_live(self, fig: dict) -> None:  # every train.log_every_s between evaluations
        if self.bar is not None:
            self.bar.timed(fig["epoch_eta_s"])
        else:
            say(progress_line(fig))
        self.logger.log_metrics(progress_metrics(fig), step=fig["step"])


def _finish(cfg: PipelineConfig, idx: SourceIndex, collector, logger: RunLogger, run_dir: Path,
            resume: Resume | None, collected: dict, events: _RunEvents, where: tuple) -> dict[str, Any]:
    """After the fit: the audit (when on) and summary.json, from what the collector gathered.
    `where`: (pipeline, MLflow run id, tracking URI, start time)."""
    final = collected["final"]
    if final is None:
        raise RuntimeError("training ended without a final report from rank 0")
    if cfg.audit.enabled:
        rows = write_audit(collector, run_dir / "audit.parquet", resume.audit if resume else None)
        say(f"audit: {rows} rows -> {run_dir / 'audit.parquet'}")
        logger.log_file(run_dir / "audit.parquet")
    log_trained_model(cfg, idx, logger, run_dir, ray.get(collector.take_model.remote()))  # rank 0's final weights
    collected["text"] = text_summary(idx, final)
    pipeline, run_id, uri, t0 = where
    return _write_summary(cfg, logger, run_dir, pipeline, run_id, uri, t0, final, collected,
                          events.history, events.factor_points, resume)


def choose_local_mode(cfg: PipelineConfig, use_gpu: bool, local: bool, hooks: RunHooks,
                      resume: Resume | None) -> bool:
    """Whether this run trains in Ray Train's local mode (the train function in this process)
    rather than in a worker group: as it started when resumed; else where the run fits it
    (train/local_mode.py) and a search trial asks (hooks.local_mode) or `scaling.local_mode`
    says so (auto: on a local Ray this command started). `true` where it does not fit is bad input."""
    if resume is not None:
        return resume.trainer == "local_mode"
    mode = cfg.scaling.local_mode
    fits = fits_local_mode(cfg, use_gpu)
    if mode is True and not fits:
        raise ConfigError("scaling.local_mode: true needs one CPU worker (scaling.num_workers: 1, no GPU), "
                          "scaling.max_failures: 0 and batch_augmentation.mode: local; set it to auto or false")
    return fits and (hooks.local_mode or mode is True or (mode == "auto" and local))


def _end_collector(collector, status: str, local_mode: bool, stalled: bool) -> None:
    """Stop what still trains of a run that did not finish, then let its collector go.
    A local-mode loop stops at its next step (driver/stop.py) and a worker group when its
    aborted controller returns: both are waited for (FIT_JOIN_S) before the collector goes
    and before Ray is shut down. A stalled worker group with no controller to abort is
    abandoned instead: it has waited train.stall_timeout_s for resources already, nothing
    reaches it, and it returns only once placed (then at once: its collector is gone)."""
    if collector is None:
        return
    if status != "FINISHED":
        aborted = stop_training(collector, f"the driver stopped: {status}")
        if stalled and not local_mode and not aborted:
            abandon_fits()
        else:
            join_fit(FIT_JOIN_S)
    # The run is over: its collector goes with it. The driver process may live on (a reused
    # trial actor, a notebook calling echoray.api.train), and the actor lives as long as its owner.
    ray.kill(collector)


def _open_mlflow_run(cfg, logger, run_dir, pipeline, t0, resume, hooks, train_run_name):
    """(pipeline, t0, MLflow run id): a resumed run's own, or a new run with config.yaml."""
    if resume:  # the same MLflow run and Ray Train storage, from the latest checkpoint
        find_checkpoint(resume, train_run_name)
        pipeline, t0, run_id = resume.pipeline, resume.started_at, logger.reopen(resume.mlflow_run_id)
        say(f"resuming {run_dir} from " + (f"the checkpoint of evaluation {resume.epoch}" if resume.checkpoint
                                           else "the start (it had no checkpoint yet)"))
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(to_yaml(cfg))
        run_id = logger.start(
            run_name=hooks.run_name or run_dir.name, params=flatten(cfg),
            tags={"echoray.pipeline": pipeline, "echoray.run_dir": str(run_dir.resolve()), **hooks.tags},
            parent_run_id=hooks.parent_run_id,
        )
        logger.log_file(run_dir / "config.yaml")
    return pipeline, t0, run_id


def _write_summary(cfg, logger, run_dir, pipeline, run_id, uri, t0, final, collected, history,
                   factor_points, resume) -> dict[str, Any]:
    """summary.json (the DESIGN.md contract plus history, faults, e over time), logged to MLflow."""
    summary = build_summary(
        cfg, pipeline=pipeline, run_dir=run_dir, mlflow_run_id=run_id, mlflow_uri=uri,
        final=final, collected=collected, t0=t0, t_end=time.time(),
    )
    summary["history"] = history
    summary["mlflow_experiment_id"] = logger.experiment_id
    summary["mlflow_artifact_uri"] = logger.artifact_uri()
    summary["faults"] = fault_summary(collected, resume.resumes if resume else [])
    summary["metric_tta"] = history[-1]["accuracy_tta"] if history else None
    summary["echo"]["factor_history"] = [
        {"t": round(p["time"] - t0, 2), "factor": p["factor"], "measured_R": p["measured_R"]}
        for p in factor_points]
    write_json_atomic(run_dir / "summary.json", summary)
    logger.log_file(run_dir / "summary.json")
    logger.log_metrics({k: summary[k] for k in (
        "fresh_examples", "trained_examples", "wall_s", "fresh_examples_to_target",
        "time_to_target_s", "upstream_examples_per_s", "downstream_examples_per_s", "measured_R")
        if summary[k] is not None}, step=final["steps"])
    return summary


def _warm_up(uri: str, experiment: str, box: dict) -> None:
    try:
        from echoray.train.trainer import build_trainer

        box["build_trainer"] = build_trainer
        box["logger"] = RunLogger(uri, experiment)
    except Exception as exc:  # surfaced on the main thread
        box["error"] = exc


