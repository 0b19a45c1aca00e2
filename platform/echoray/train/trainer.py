"""Thin adapter: the pipeline config -> a Ray Train V2 TorchTrainer over the Ray Data stream."""

from __future__ import annotations

from pathlib import Path

from ray.train import DataConfig, FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchConfig, TorchTrainer

from echoray.config import PipelineConfig
from echoray.data.pipeline import build_train_dataset
from echoray.data.sources import SourceIndex
from echoray.runtime.resources import ResourcePlan
from echoray.train.entry import train_loop_per_worker
from echoray.train.groups import GroupedDataConfig


def data_config(cfg: PipelineConfig) -> DataConfig:
    options = DataConfig.default_ingest_options()
    options.preserve_order = cfg.preprocess.deterministic
    ba = cfg.batch_augmentation
    if ba.mode == "grouped":
        return GroupedDataConfig(ba.copies, execution_options=options)
    return DataConfig(datasets_to_split=["train"], execution_options=options)


def build_trainer(
    cfg: PipelineConfig, idx: SourceIndex, plan: ResourcePlan, use_gpu: bool, collector, run_dir: Path
) -> TorchTrainer:
    per_worker = {k: v for k, v in plan.per_worker.items() if k != "GPU"}
    return TorchTrainer(
        train_loop_per_worker,
        train_loop_config={"cfg": cfg.model_dump(mode="json"), "index": idx, "collector": collector},
        scaling_config=ScalingConfig(
            num_workers=cfg.scaling.num_workers, use_gpu=use_gpu, resources_per_worker=per_worker
        ),
        torch_config=TorchConfig(backend="nccl" if use_gpu else "gloo"),
        datasets={"train": build_train_dataset(cfg, idx, collector)},
        dataset_config=data_config(cfg),
        run_config=RunConfig(
            name="train",
            storage_path=str((run_dir / "ray").resolve()),
            failure_config=FailureConfig(max_failures=0),
        ),
    )
