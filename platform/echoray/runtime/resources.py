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
    actors_min: int
    per_actor: dict[str, float]

    def demand(self) -> dict[str, float]:
        """The least the run needs at once to make progress."""
        total: dict[str, float] = defaultdict(float)
        for res, n in ((self.per_worker, self.num_workers), (self.per_actor, self.actors_min)):
            for k, v in res.items():
                total[k] += v * n
        return dict(total)

    def describe(self) -> str:
        return (
            f"{self.num_workers} train worker(s) x {self.per_worker}, "
            f"preprocessing pool of {self.actors_min}+ actor(s) x {self.per_actor}"
        )


def plan_resources(cfg: PipelineConfig, use_gpu: bool) -> ResourcePlan:
    a = cfg.preprocess.actors
    per_worker = {"CPU": cfg.scaling.cpus_per_worker, **cfg.scaling.resources_per_worker}
    if use_gpu:
        per_worker["GPU"] = 1.0
    return ResourcePlan(
        num_workers=cfg.scaling.num_workers,
        per_worker=per_worker,
        actors_min=a.min_size,
        per_actor={"CPU": a.num_cpus, **a.resources},
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
