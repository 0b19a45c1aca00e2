"""Placement on node types, falling back to the nodes that exist.

cluster.yaml tags its node types with custom resources (`cpu_worker` nodes have
`cpu_node`, `gpu_worker` nodes `gpu_node`) and a cluster pipeline asks for them
(`preprocess.actors.resources`, `scaling.resources_per_worker`) and for GPUs
(`scaling.use_gpu: true`). Such a request is kept when some node has the resource
now or an autoscaler can add nodes: it launches the node type that provides it (if
none does, Ray reports the demand infeasible and a stalled run names the resource).
Otherwise nothing will ever provide it, on one machine or a fixed cluster, so the
request is dropped and the work runs on the nodes that exist; the run says so.
"""

from __future__ import annotations

from collections.abc import Mapping

import ray

from echoray.config import PipelineConfig
from echoray.runtime.autoscaler import autoscaler_can_add_nodes


def fit_to_cluster(
    cfg: PipelineConfig, total: Mapping[str, float], can_add_nodes: bool
) -> tuple[PipelineConfig, list[str]]:
    """The config with the requests this cluster can never meet removed, and one note each."""
    if can_add_nodes:
        return cfg, []
    out = cfg.model_copy(deep=True)
    notes = []
    actors = out.preprocess.actors
    kept, dropped = _split(actors.resources, total)
    if dropped:
        actors.resources = kept
        notes.append(f"placement: no node has {', '.join(dropped)} and no autoscaler can add one; "
                     "preprocessing actors run on any node")
    kept, dropped = _split(out.scaling.resources_per_worker, total)
    if dropped:
        out.scaling.resources_per_worker = kept
        notes.append(f"placement: no node has {', '.join(dropped)} and no autoscaler can add one; "
                     "train workers run on any node")
    if out.scaling.use_gpu is True and total.get("GPU", 0) <= 0:
        out.scaling.use_gpu = False
        notes.append("placement: no node has a GPU and no autoscaler can add one; training on CPU")
    return out, notes


def _split(wanted: Mapping[str, float], total: Mapping[str, float]) -> tuple[dict, list[str]]:
    kept = {k: v for k, v in wanted.items() if total.get(k, 0) > 0}
    return kept, sorted(set(wanted) - set(kept))


def fit_placement(cfg: PipelineConfig) -> tuple[PipelineConfig, list[str]]:
    """fit_to_cluster against the connected cluster."""
    return fit_to_cluster(cfg, ray.cluster_resources(), autoscaler_can_add_nodes())
