"""MLflow's system metrics (CPU, memory, disk, network; GPU where present) from each node of a
worker group other than the driver's, on the run as `system/node_<node rank>/...`.

Contract:
- The driver's monitor (tracking.py `_watch_system`) samples its own node: psutil's figures
  are the host's, so a worker on the driver's node adds nothing and starts none.
- On any other node one worker samples it, the one of local rank 0, from the start of its
  training function to its end (a restarted worker group starts it again; its steps go on
  from the run's last system step, MLflow's `resume_logging`).
- The worker logs to the tracking store itself, so only an http(s) tracking URI is watched
  from the nodes: a sqlite or file store lives on the driver's disk, and a worker elsewhere
  would make an empty store of its own at that path. With such a store, the driver's node's
  metrics are all there is.
- `MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING=false` on the driver turns these off with its own.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager


def node_tracking(uri: str, run_id: str, driver_node: str) -> dict | None:
    """What a worker needs to watch its node (the training function's config), or None where
    no node is watched: a tracking store the nodes cannot reach, or system metrics off."""
    if os.environ.get("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "").lower() in ("false", "0"):
        return None
    if not uri.startswith(("http://", "https://")):
        return None
    return {"uri": uri, "run_id": run_id, "driver_node": driver_node}


def node_label(tracking: dict | None, local_rank: int, node_rank: int, node_id: str) -> str | None:
    """`node_<node rank>` for the worker that watches its node, else None."""
    if tracking is None or local_rank != 0 or node_id == tracking["driver_node"]:
        return None
    return f"node_{node_rank}"


@contextmanager
def watching_node(tracking: dict | None) -> Iterator[None]:
    """Around a worker group's training function: its node's metrics while it runs, where
    `node_label` says this worker watches them."""
    label = None
    if tracking is not None:
        import ray
        import ray.train

        ctx = ray.train.get_context()
        label = node_label(tracking, ctx.get_local_rank(), ctx.get_node_rank(),
                           ray.get_runtime_context().get_node_id())
    if label is None:
        yield
        return
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    # its start and stop lines are INFO: Ray would forward them to the driver's console
    logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)
    monitor = SystemMetricsMonitor(tracking["run_id"], resume_logging=True, node_id=label,
                                   tracking_uri=tracking["uri"])
    monitor.start()
    try:
        yield
    finally:
        monitor.finish()
