"""Thin adapter: the pipeline config -> a Ray Train V2 TorchTrainer over the Ray Data stream."""

from __future__ import annotations

import os

from ray.train import (
    CheckpointConfig,
    DataConfig,
    FailureConfig,
    LoggingConfig,
    RunConfig,
    ScalingConfig,
)
from ray.train.torch import TorchConfig, TorchTrainer

from echoray.config import PipelineConfig
from echoray.data.sources import SourceIndex
from echoray.recovery import checkpoint
from echoray.runtime.commit import CommitCallback
from echoray.runtime.resources import ResourcePlan
from echoray.storage.fs import is_uri, open_location
from echoray.storage.retrying_fs import retrying
from echoray.train.groups import GroupedDataConfig
from echoray.train.train_stream import TrainStream
from echoray.worker.entry import train_loop_local, train_loop_per_worker

TRAIN_RUN_NAME = "train"
# Ray Train's controller takes a worker's report (checkpoint) only when it polls the
# workers, every 2 s by default: a report waits for the previous one to be taken, so
# epochs shorter than that were slowed to its pace (10 digits epochs: 7.5 s -> 18 s of
# training). Polling every 0.5 s removes it (9.0 s) and notices a dead worker sooner.
HEALTH_CHECK_INTERVAL = ("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.5")


def data_config(cfg: PipelineConfig) -> DataConfig:
    options = DataConfig.default_ingest_options()
    options.preserve_order = True  # one seed, one batch sequence
    ba = cfg.batch_augmentation
    if ba.mode == "grouped":
        return GroupedDataConfig(ba.copies, execution_options=options)
    # Split even for one worker. Reading unsplit (the executor inside the worker, no
    # SplitCoordinator process) started 2-3 s sooner, but on the autoscaling e2e cluster
    # the job then failed (the controller's working directory gone) or the preprocessing
    # node never went idle; with the split both pass (measured on a clean clone).
    return DataConfig(datasets_to_split=["train"], execution_options=options)


def train_storage(storage: str, retry_s: float):
    """(storage_path, storage_filesystem) for Ray Train's RunConfig: a folder as it is; an
    object store URI as its path and a filesystem whose every call waits out an outage for
    `retry_s` (TrainConfig.store_retry_s; echoray/storage/retrying_fs.py), so the workers' checkpoint uploads
    and the controller's state writes retry as the in-process checkpoint writes do."""
    if not is_uri(storage):
        return storage, None
    fs, path = open_location(storage, "train.storage_path")
    return path, retrying(fs, retry_s, f"train.storage_path {storage}")


def build_trainer(
    cfg: PipelineConfig, idx: SourceIndex, plan: ResourcePlan, use_gpu: bool, collector, storage: str,
    local: dict | None = None, tracking: dict | None = None,
) -> TorchTrainer:
    """`storage`: where the checkpoints go (echoray.storage.fs.checkpoint_location), a folder or URI.
    `local`: train in Ray Train's local mode (train/local_fit.py local_config), else a worker group.
    `tracking`: the worker nodes' system metrics (runtime/node_metrics.py node_tracking)."""
    per_worker = {k: v for k, v in plan.per_worker.items() if k != "GPU"}
    storage_path, storage_fs = train_storage(storage, cfg.train.store_retry_s())
    os.environ.setdefault(*HEALTH_CHECK_INTERVAL)  # read from the driver's environment at fit()
    config = {"cfg": cfg.model_dump(mode="json"), "index": idx, "collector": collector, **(local or {}),
              "tracking": None if local else tracking}
    return TorchTrainer(
        train_loop_local if local else train_loop_per_worker,
        train_loop_config=config,
        scaling_config=ScalingConfig(
            num_workers=0 if local else cfg.scaling.ray_num_workers(), use_gpu=use_gpu, resources_per_worker=per_worker
        ),
        torch_config=TorchConfig(backend="nccl" if use_gpu else "gloo"),
        # A factory, not a Dataset: each (re)started worker group reads from its checkpoint on.
        datasets={"train": TrainStream(cfg, idx, collector)},
        dataset_config=data_config(cfg),
        run_config=RunConfig(
            name=TRAIN_RUN_NAME,
            storage_path=storage_path,  # the filesystem pickles its endpoint, not credentials: each node reads its own
            storage_filesystem=storage_fs,
            failure_config=FailureConfig(max_failures=cfg.scaling.max_failures),
            # With the audit on, each checkpoint holds its epochs' audit rows: keep them all.
            checkpoint_config=CheckpointConfig(
                num_to_keep=None if cfg.audit.enabled else checkpoint.KEPT),
            callbacks=[CommitCallback(collector)],
            logging_config=LoggingConfig(log_level="WARNING"),  # not a line per checkpoint
        ),
    )
