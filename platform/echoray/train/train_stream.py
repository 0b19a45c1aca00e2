"""The trainer's "train" dataset factory, which Ray Train calls in its controller.

It lives in train/, not data/, because it reads the replay part of a training
checkpoint (train/checkpoint.py); data/ never imports train/. Import-light (no torch):
the controller unpickles it.
"""

from __future__ import annotations

import ray
import ray.data

from echoray.config import PipelineConfig
from echoray.data.pipeline import build_train_dataset
from echoray.data.sources import SourceIndex


class TrainStream:
    """The trainer's "train" dataset as a factory: Ray Train calls it in its controller each
    time a worker group starts, so a group restarted after a failure reads from the
    checkpoint it restores (the collector holds the latest one Ray Train registered)."""

    def __init__(self, cfg: PipelineConfig, idx: SourceIndex, collector):
        self.cfg, self.idx, self.collector = cfg, idx, collector

    def __call__(self) -> ray.data.Dataset:
        from echoray.runtime.session import quiet_data
        from echoray.train.checkpoint import read_replay

        quiet_data()  # this runs in Ray Train's controller, not the driver
        # ... so it can hand the controller to the driver, which stops it if the run fails.
        self.collector.register_controller.remote(ray.get_runtime_context().current_actor)
        commit = ray.get(self.collector.latest_checkpoint.remote())
        first_epoch, consumed = read_replay(commit["checkpoint"]) if commit else (0, None)
        return build_train_dataset(self.cfg, self.idx, self.collector, first_epoch, consumed)
