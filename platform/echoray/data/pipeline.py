"""Builds the training Dataset: read plan -> decode -> [echo] -> augment -> [echo].

One Dataset covers all epochs, so Ray Data starts once per run. Shuffling after
the echo point and batching happen per worker (`iter_batches` with a local
shuffle buffer, see train/loop.py); batch echoing happens on the worker too.
"""

from __future__ import annotations

import pyarrow as pa
import ray.data
from ray.data import ActorPoolStrategy

from echoray.config import PipelineConfig
from echoray.data.echo import EchoRows
from echoray.data.plan import num_chunks, read_plan
from echoray.data.sources import SourceIndex
from echoray.data.stages import Augment, ReadDecode, ReadDecodeAugment


def _pool(cfg: PipelineConfig) -> dict:
    a = cfg.preprocess.actors
    return {
        "compute": ActorPoolStrategy(min_size=a.min_size, max_size=a.max_size),
        "num_cpus": a.num_cpus,
        **({"resources": dict(a.resources)} if a.resources else {}),
    }


def _echo(ds: ray.data.Dataset, cfg: PipelineConfig, collector) -> ray.data.Dataset:
    res = cfg.preprocess.actors.resources
    auto = cfg.echo.factor == "auto"
    return ds.map_batches(
        EchoRows(cfg.echo.factor, cfg.seed, factor_source=collector if auto else None),
        batch_size=None,
        num_cpus=cfg.preprocess.task_cpus,
        udf_modifying_row_count=True,  # keeps Ray's optimizer from moving limits past it
        **({"resources": dict(res)} if res else {}),
    )


def build_train_dataset(cfg: PipelineConfig, idx: SourceIndex, collector=None) -> ray.data.Dataset:
    n_chunks = num_chunks(len(idx.train_ids), cfg.source.chunk_size)
    blocks = read_plan(cfg.seed, cfg.train.max_epochs, n_chunks)
    ds = ray.data.from_arrow([pa.table(b) for b in blocks])
    chunks_per_batch = max(1, cfg.preprocess.batch_size // cfg.source.chunk_size)
    stage = cfg.echo.stage
    read_args = (idx, cfg.source.chunk_size, cfg.source.remote)
    augment_on_cpu = cfg.preprocess.augment.on == "cpu"
    if augment_on_cpu and stage != "before_augment":
        # Nothing between decode and augment: run them as one actor stage.
        return _echo_after(ds.map_batches(
            ReadDecodeAugment,
            fn_constructor_args=(*read_args, cfg.preprocess.augment.ops, cfg.seed, collector),
            batch_size=chunks_per_batch,
            udf_modifying_row_count=True,
            **_pool(cfg),
        ), cfg, collector)
    ds = ds.map_batches(
        ReadDecode,
        fn_constructor_args=(*read_args, collector),
        batch_size=chunks_per_batch,
        udf_modifying_row_count=True,
        **_pool(cfg),
    )
    if stage == "before_augment":
        ds = _echo(ds, cfg, collector)
    if augment_on_cpu:
        ds = ds.map_batches(
            Augment,
            fn_constructor_args=(cfg.preprocess.augment.ops, cfg.seed, stage == "before_augment", collector),
            batch_size=cfg.preprocess.batch_size,
            udf_modifying_row_count=False,
            **_pool(cfg),
        )
    return _echo_after(ds, cfg, collector)


def _echo_after(ds: ray.data.Dataset, cfg: PipelineConfig, collector) -> ray.data.Dataset:
    return _echo(ds, cfg, collector) if cfg.echo.stage == "after_augment" else ds
