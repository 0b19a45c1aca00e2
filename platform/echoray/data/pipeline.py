"""Builds the training Dataset: read plan -> one preprocessing actor stage.

One Dataset covers all epochs, so Ray Data starts once per run. The actor stage
(data/stages.py) reads, decodes, echoes and augments in the order the config
places them; shuffling and batching happen per worker (`iter_batches` with a local
shuffle buffer, see train/loop.py), and batch echoing happens on the worker too.
"""

from __future__ import annotations

import pyarrow as pa
import ray.data
from ray.data import ActorPoolStrategy

from echoray.config import PipelineConfig
from echoray.data.plan import num_chunks, read_plan
from echoray.data.sources import SourceIndex
from echoray.data.stages import Preprocess


def build_train_dataset(cfg: PipelineConfig, idx: SourceIndex, collector=None) -> ray.data.Dataset:
    n_chunks = num_chunks(len(idx.train_ids), cfg.source.chunk_size)
    blocks = read_plan(cfg.seed, cfg.train.max_epochs, n_chunks)
    ds = ray.data.from_arrow([pa.table(b) for b in blocks])
    a = cfg.preprocess.actors
    example_echo = cfg.echo.stage in ("before_augment", "after_augment")
    ops = cfg.preprocess.augment.ops if cfg.preprocess.augment.on == "cpu" else None
    return ds.map_batches(
        Preprocess,
        fn_constructor_args=(
            idx, cfg.source.chunk_size, cfg.source.remote, ops, cfg.seed,
            cfg.echo.stage if example_echo else "none", cfg.echo.factor if example_echo else 1.0, collector,
        ),
        batch_size=max(1, cfg.preprocess.batch_size // cfg.source.chunk_size),
        compute=ActorPoolStrategy(min_size=a.min_size, max_size=a.max_size),
        num_cpus=a.num_cpus,
        udf_modifying_row_count=True,  # reads expand chunks; echo repeats rows
        **({"resources": dict(a.resources)} if a.resources else {}),
    )
