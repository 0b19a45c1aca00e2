"""What Ray Train's local mode (`ScalingConfig(num_workers=0)`) lacks for echoray, and the
smallest adapter that adds it. The train function is the one a worker group runs
(worker/entry.py); only these differ, each because of what Ray 2.60's local mode does:

- Checkpoints: local mode's `ray.train.report` keeps the last checkpoint in memory
  (`LocalTrainFnUtils.report`) and writes nothing to `RunConfig.storage_path`, so a kept
  checkpoint goes through recovery/checkpoint_store.py, in the run's storage, and the collector
  is told of it directly (no Ray Train callback runs in local mode).
- Restore: local mode ignores `resume_from_checkpoint` (`get_checkpoint()` starts at None),
  so a resumed run hands the loop its checkpoint in the train function's config.
- Threads: the train function runs in the driver, where Ray sets no OMP_NUM_THREADS: torch
  gets the worker's `scaling.cpus_per_worker`, as in a Ray Train worker of the same plan.
- Stop: no controller aborts the function, so the loop checks driver/stop.py's flag (the
  driver's signal handlers set it) before every step.
- Ray Data's iterator threads outlive a stream closed at the target; the process goes on
  (the driver shuts Ray down, a Tune trial actor runs the next trial), so they are let end
  while Ray is up (`settle_stream`).
"""

from __future__ import annotations

import gc
import threading
import time
from pathlib import Path
from typing import Any

from echoray.config import PipelineConfig


def local_config(cfg: PipelineConfig, storage: str, keep_checkpoints: bool, restore: Any) -> dict[str, Any]:
    """The entries a local-mode fit adds to the train function's config (never pickled:
    the function runs in this process)."""
    return {"local_mode": {"storage": storage if keep_checkpoints else None, "restore": restore}}


def checkpoint_sink(cfg: PipelineConfig, storage: str | None, link):
    """(keep, sink) for restore_and_keep: checkpoints into the run's CheckpointStore, each
    told to the collector once the store's index names it; (False, None) keeps none."""
    if storage is None:
        return False, None
    from echoray.recovery.checkpoint import KEPT
    from echoray.recovery.checkpoint_store import CheckpointStore

    # With the audit on, each checkpoint holds its epochs' audit rows: keep them all (as Ray Train).
    store = CheckpointStore(storage, None if cfg.audit.enabled else KEPT,
                            cfg.train.store_retry_s())

    def sink(metrics: dict, local_dir: Path) -> None:
        link.ask("committed", store.save(metrics, local_dir), metrics)

    return True, sink


def settle_stream(timeout_s: float = 5.0) -> None:
    """Let a closed stream's Ray Data threads end while Ray is still up. Left running, one of
    them called into the core worker after the CLI shut Ray down and ended the process with
    exit 1 ("The core worker has already been shutdown"). The thread name is Ray Data's own;
    Ray 2.60's DataIterator has no close() (added upstream by ray-project/ray#62949)."""
    gc.collect()  # an interrupted stream's generators in cycles: collecting sets their stop events
    deadline = time.monotonic() + timeout_s
    for t in threading.enumerate():
        if t.name == "iter_threaded":  # ray/data/_internal/block_batching/util.py
            t.join(max(0.0, deadline - time.monotonic()))
    gc.collect()
