"""Logical resources of a run, planned together so small machines do not deadlock.

Ray Data actor pools and Ray Train workers draw from the same CPUs. If their sum
exceeds what the cluster has, Ray waits forever without a word; so a local run
checks the plan up front, and every run names the shortfall when it stalls.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from echoray.config import PipelineConfig


@dataclass(frozen=True)
class ResourcePlan:
    num_workers: int
    per_worker: dict[str, float]
    actor_pools: int
    actors_min: int
    per_actor: dict[str, float]
    task_ops: int
    per_task: dict[str, float]

    def demand(self) -> dict[str, float]:
        """The least the run needs at once to make progress."""
        total: dict[str, float] = defaultdict(float)
        for res, n in ((self.per_worker, self.num_workers),
                       (self.per_actor, self.actor_pools * self.actors_min),
                       (self.per_task, min(self.task_ops, 1))):
            for k, v in res.items():
                total[k] += v * n
        return dict(total)

    def describe(self) -> str:
        return (
            f"{self.num_workers} train worker(s) x {self.per_worker}, "
            f"{self.actor_pools} preprocessing pool(s) x {self.actors_min}+ actor(s) x {self.per_actor}"
            + (f", echo tasks x {self.per_task}" if self.task_ops else "")
        )


def plan_resources(cfg: PipelineConfig, use_gpu: bool) -> ResourcePlan:
    a = cfg.preprocess.actors
    per_worker = {"CPU": cfg.scaling.cpus_per_worker, **cfg.scaling.resources_per_worker}
    if use_gpu:
        per_worker["GPU"] = 1.0
    pools = 2 if (cfg.preprocess.augment.on == "cpu" and cfg.echo.stage == "before_augment") else 1
    per_actor = {"CPU": a.num_cpus, **a.resources}
    task_ops = int(cfg.echo.stage in ("before_augment", "after_augment"))
    return ResourcePlan(
        num_workers=cfg.scaling.num_workers,
        per_worker=per_worker,
        actor_pools=pools,
        actors_min=a.min_size,
        per_actor=per_actor,
        task_ops=task_ops,
        per_task={"CPU": cfg.preprocess.task_cpus, **a.resources},
    )


def shortfall(demand: dict[str, float], available: dict[str, float]) -> dict[str, tuple[float, float]]:
    """resource -> (needed, present) for every resource the cluster lacks."""
    eps = 1e-6
    return {
        k: (v, float(available.get(k, 0.0)))
        for k, v in demand.items()
        if v > 0 and float(available.get(k, 0.0)) + eps < v
    }


def format_shortfall(missing: dict[str, tuple[float, float]]) -> str:
    return ", ".join(f"{k}: needs {need:g}, cluster has {have:g}" for k, (need, have) in missing.items())
