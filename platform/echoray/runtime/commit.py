"""Ray Train's controller tells the run's collector what it did with checkpoints.

`after_report` runs in the controller right after Ray Train registered a checkpoint
(and wrote the snapshot a restarted controller reads), so the collector learns of a
checkpoint exactly when a restart would use it: epochs up to it are final, and the
next worker group's training stream starts from it (train/train_stream.py TrainStream).
"""

from __future__ import annotations

import time
from typing import Any

from ray.train import UserCallback


class CommitCallback(UserCallback):
    def __init__(self, collector):
        self.collector = collector

    def after_report(self, run_context, metrics: list[dict[str, Any]], checkpoint) -> None:
        if checkpoint is not None:
            import ray

            # Wait for it: the next worker group must not start before the collector knows.
            ray.get(self.collector.committed.remote(checkpoint, dict(metrics[0])))

    def after_exception(self, run_context, worker_exceptions: dict[int, Exception]) -> None:
        errors = "; ".join(f"rank {r}: {type(e).__name__}: {str(e)[:300]}" for r, e in worker_exceptions.items())
        self.collector.failed.remote(time.time(), errors)

