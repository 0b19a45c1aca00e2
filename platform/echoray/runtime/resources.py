"""Logical resources of a run, planned together so small machines do not deadlock.

Ray Data actor pools and Ray Train workers draw from the same CPUs. If their sum
exceeds what the cluster has, Ray waits forever without a word; so a local run
checks the plan up front, and every run names the shortfall when it stalls.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from echoray.config import PipelineConfig


@dataclass(frozen=True)
class ResourcePlan:
    num_workers: int  # the most train workers (scaling.num_workers, or its max)
    per_worker: dict[str, float]
    actors_min: int
    per_actor: dict[str, float]
    min_workers: int | None = None  # an elastic group's least (scaling.num_workers [min, max]); None: fixed

    def demand(self) -> dict[str, float]:
        """The least the run needs at once to make progress with `num_workers` workers."""
        total: dict[str, float] = defaultdict(float)
        for res, n in ((self.per_worker, self.num_workers), (self.per_actor, self.actors_min)):
            for k, v in res.items():
                total[k] += v * n
        return dict(total)

    def with_workers(self, n: int) -> ResourcePlan:
        """This plan for a group of `n` train workers."""
        return replace(self, num_workers=n)

    def least(self) -> ResourcePlan:
        """The plan at its fewest workers (an elastic group's min): what progress needs."""
        return self if self.min_workers is None else replace(self, num_workers=self.min_workers)

    def describe(self) -> str:
        count = f"{self.num_workers}" if self.min_workers is None else f"{self.min_workers} to {self.num_workers}"
        return (
            f"{count} train worker(s) x {self.per_worker}, "
            f"preprocessing pool of {self.actors_min}+ actor(s) x {self.per_actor}"
        )


def plan_resources(cfg: PipelineConfig, use_gpu: bool) -> ResourcePlan:
    a, s = cfg.preprocess.actors, cfg.scaling
    per_worker = {"CPU": s.cpus_per_worker, **s.resources_per_worker}
    if use_gpu:
        per_worker["GPU"] = 1.0
    return ResourcePlan(
        num_workers=s.max_workers,
        per_worker=per_worker,
        actors_min=a.min_size,
        per_actor={"CPU": a.num_cpus, **a.resources},
        min_workers=s.min_workers if s.elastic else None,
    )


def elastic_group_size(plan: ResourcePlan, total: dict[str, float]) -> int:
    """How many workers Ray Train 2.60 starts an elastic group with on a cluster of these
    resources: as many as the cluster's *total* resources hold, capped at the max, whatever
    else is running (ray/train/v2/_internal/execution/scaling_policy/elastic.py
    `_count_possible_workers`, over the AutoscalingCoordinator's reservation of node totals).
    Summed over the cluster here, where Ray counts node by node: exact for one machine."""
    fits = [int(total.get(k, 0.0) // v) for k, v in plan.per_worker.items() if v > 0]
    return min([plan.num_workers, *fits])


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
