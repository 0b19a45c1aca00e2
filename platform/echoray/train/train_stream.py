"""The trainer's "train" dataset factory, which Ray Train calls in its controller.

It lives in train/, not data/, because it reads the replay part of a training
checkpoint (recovery/checkpoint.py); data/ never imports train/. Import-light (no torch):
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
    checkpoint it restores (the collector holds the latest one Ray Train registered). In
    local mode Ray Train calls it once, in the driver, and hands the Dataset itself to the
    train function (no DataConfig applies, so the output order is set here)."""

    def __init__(self, cfg: PipelineConfig, idx: SourceIndex, collector):
        self.cfg, self.idx, self.collector = cfg, idx, collector

    def __call__(self) -> ray.data.Dataset:
        from echoray.recovery.checkpoint import read_replay
        from echoray.runtime.session import quiet_data

        quiet_data()  # this runs in Ray Train's controller (local mode: the driver)
        context = ray.get_runtime_context()
        if context.get_actor_id() is not None:  # the controller, for the driver to stop if the run fails
            self.collector.register_controller.remote(context.current_actor)
        commit = ray.get(self.collector.latest_checkpoint.remote())
        first_epoch, consumed = read_replay(commit["checkpoint"]) if commit else (0, None)
        ds = build_train_dataset(self.cfg, self.idx, self.collector, first_epoch, consumed)
        ds.context.execution_options.preserve_order = True  # one seed, one batch sequence
        return ds
