"""Checks made before anything of a run exists (no run folder, MLflow run or Ray job):
what this cluster cannot run, a bad storage location, too few steps for the evaluation
points. Each failure is bad input (ConfigError, exit 2) naming the key."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray

from echoray.config import PipelineConfig
from echoray.config_load import ConfigError
from echoray.messages import say
from echoray.runtime.placement import fit_placement
from echoray.runtime.resources import (
    ResourcePlan,
    elastic_group_size,
    format_shortfall,
    plan_resources,
    shortfall,
)
from echoray.storage.fs import StorageError, require_shared_storage
from echoray.storage.locations import runs_root


def new_run_dir(cfg: PipelineConfig, out: str | None) -> Path:
    if out:
        d = Path(out)
        if (d / "summary.json").exists():
            raise ConfigError(f"--out {d}: already holds a finished run (summary.json); choose another folder")
    else:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        d = runs_root() / f"{cfg.name}-{stamp}"
    return d


def resolve_gpu(cfg: PipelineConfig) -> bool:
    if cfg.scaling.use_gpu == "auto":
        return ray.cluster_resources().get("GPU", 0) >= 1
    return bool(cfg.scaling.use_gpu)


def fit_cluster(cfg: PipelineConfig, storage: str, local: bool, n_train: int):
    """(cfg, use_gpu, plan) for the connected cluster; what it cannot run is bad input
    (ConfigError / StorageError), found before a run folder or MLflow run exists."""
    check_eval_points(cfg, n_train)
    cfg, placement_notes = fit_placement(cfg)  # node-type requests this cluster can never meet
    for note in placement_notes:
        say(note)
    storage_checked(require_shared_storage, storage, cfg.train.checkpoint_every, cfg.train.storage_shared)
    use_gpu = resolve_gpu(cfg)
    if cfg.train.precision == "fp16" and not use_gpu:
        raise ConfigError("train.precision: fp16 needs a GPU and this run has none "
                          "(scaling.use_gpu: auto found no GPU); use bf16 or fp32")
    plan = plan_resources(cfg, use_gpu)
    if local:
        require_plan_fits(plan)
    return cfg, use_gpu, plan


def require_plan_fits(plan: ResourcePlan, total: dict[str, float] | None = None) -> None:
    """The train workers and the preprocessing pool fit this machine at once (ConfigError
    otherwise). An elastic group (scaling.num_workers [min, max]) is checked at the size Ray
    Train will start it with here (runtime/resources.py elastic_group_size): at least min."""
    total = ray.cluster_resources() if total is None else total
    lower = ". Lower scaling.num_workers, scaling.cpus_per_worker or preprocess.actors.*"
    started = ""
    if plan.min_workers is not None:
        n = elastic_group_size(plan, total)
        if n < plan.min_workers:
            raise ConfigError(f"scaling.num_workers [{plan.min_workers}, {plan.num_workers}]: this machine holds "
                              f"{n} train worker(s) x {plan.per_worker}, fewer than the min {plan.min_workers}{lower}")
        started = (f" (Ray Train starts an elastic group with as many workers as the machine's resources hold "
                   f"in all: {n} here, beside the preprocessing pool)")
        plan = plan.with_workers(n)
    require_fits(plan.demand(), "the pipeline", f". Plan: {plan.describe()}{started}{lower}", total)


def require_fits(demand: dict[str, float], what: str, advice: str, total: dict[str, float] | None = None) -> None:
    """`what` needing more than the machine has (`total`, default Ray's cluster resources)
    is bad input, said with the shortfall and `advice` (its own leading punctuation).
    train, tune and bench-input call it on a local Ray (a fixed machine; a cluster may
    grow), so that Ray never waits silently for resources that cannot come."""
    missing = shortfall(demand, ray.cluster_resources() if total is None else total)
    if missing:
        raise ConfigError(f"{what} needs more than this machine has ({format_shortfall(missing)}){advice}")


def check_eval_points(cfg: PipelineConfig, n_train: int) -> None:
    """train.evals_per_epoch that an epoch of this source has too few steps for: bad input.
    (Imports torch, which the warm-up thread is importing meanwhile: costs no extra wait.)"""
    from echoray.train.loop import check_evals_per_epoch

    try:
        check_evals_per_epoch(cfg, n_train, cfg.scaling.max_workers)  # the most workers: the fewest steps
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def storage_checked(check: Callable, *args) -> Any:
    """A storage problem found before the run starts is bad input (exit 2)."""
    try:
        return check(*args)
    except StorageError as exc:
        raise ConfigError(str(exc)) from None
