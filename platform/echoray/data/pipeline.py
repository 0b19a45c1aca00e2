"""Builds the training Dataset: read plan -> one preprocessing actor stage.

One Dataset covers all epochs, so Ray Data starts once per run. The actor stage
(data/stages.py) reads, decodes, echoes and augments in the order the config
places them; shuffling and batching happen per worker (`iter_batches` with a local
shuffle buffer, see train/loop.py), and batch echoing happens on the worker too.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import ray.data
from ray.data import ActorPoolStrategy

from echoray.config import PipelineConfig
from echoray.data.plan import num_chunks, plan_chunks, read_plan  # noqa: F401 - num_chunks re-exported
from echoray.data.sources import SourceIndex
from echoray.data.stages import Preprocess
from echoray.train.consumption_echo import echoes_on_worker
from echoray.train.early_stream import shuffle_buffer_rows


def plan_block_chunks(planned_chunks: int, max_actors: int) -> int:
    """Chunks per read-plan block. An actor works through a block in one task, so a plan
    held in one block kept all but one actor idle (2,000 JPEGs, one epoch, 2 actors: one
    busy): at least 4 blocks per actor over the plan, at most 4096 chunks a block (each
    block costs Ray Data a metadata task when the Dataset is made)."""
    return max(1, min(4096, -(-planned_chunks // (4 * max_actors))))


def rows_ahead_floor(cfg: PipelineConfig, block_rows: int) -> int:
    """The least source.max_rows_ahead that cannot starve the workers: every worker's
    shuffle buffer (or echo pool) and prefetched batches, plus two map tasks per actor."""
    per_worker = (shuffle_buffer_rows(cfg) or 0) + 8 * cfg.train.batch_size  # Ray Data prefetch, the packer's carry, rows not yet reported
    return cfg.scaling.num_workers * per_worker + 2 * block_rows * cfg.preprocess.actors.max_size


def build_train_dataset(cfg: PipelineConfig, idx: SourceIndex, collector=None, first_epoch: int = 0,
                        consumed: dict[int, np.ndarray] | None = None) -> ray.data.Dataset:
    """The stream of plan epochs first_epoch.. without the `consumed` rows (a restored run)."""
    n_chunks = plan_chunks(idx, cfg.source.chunk_size)
    a = cfg.preprocess.actors
    planned = n_chunks * max(0, cfg.train.max_epochs - first_epoch)
    block_chunks = plan_block_chunks(planned, a.max_size)
    per_call = max(1, cfg.preprocess.batch_size // cfg.source.chunk_size)
    max_ahead = None
    if cfg.source.max_rows_ahead:  # a map task emits its rows when it ends: keep tasks small
        block_chunks = min(block_chunks, per_call)
        max_ahead = max(cfg.source.max_rows_ahead, rows_ahead_floor(cfg, block_chunks * cfg.source.chunk_size))
    blocks = read_plan(cfg.seed, cfg.train.max_epochs, n_chunks, first_epoch=first_epoch,
                       block_chunks=block_chunks)
    if not blocks:  # restored after the last epoch: nothing left to read
        blocks = [{"epoch": np.zeros(0, np.int64), "chunk": np.zeros(0, np.int64)}]
    # from_blocks, not from_arrow: from_arrow gets each block's metadata from a 1-CPU Ray
    # task. This runs in Ray Train's controller (TrainStream) and blocks its event loop:
    # a worker group restarted after a bad-data failure, with the old pipeline's actor
    # still holding its CPU, waited for that task forever on 2 CPUs, and the controller
    # never processed the driver's abort (its worker and placement group stayed; the
    # suite's next run stalled). from_blocks computes the metadata here.
    ds = ray.data.from_blocks([pa.table(b) for b in blocks])
    example_echo = cfg.echo.stage in ("before_augment", "after_augment") and not echoes_on_worker(cfg)
    ops = cfg.preprocess.augment.ops if cfg.preprocess.augment.on == "cpu" else None
    return ds.map_batches(
        Preprocess,
        fn_constructor_args=(
            idx, cfg.source.chunk_size, cfg.source.remote, ops, cfg.seed,
            cfg.echo.stage if example_echo else "none", cfg.echo.factor if example_echo else 1.0, collector,
            consumed or None, max_ahead,
        ),
        batch_size=per_call,
        compute=ActorPoolStrategy(min_size=a.min_size, max_size=a.max_size),
        num_cpus=a.num_cpus,
        udf_modifying_row_count=True,  # reads expand chunks; echo repeats rows; replays drop rows
        **({"resources": dict(a.resources)} if a.resources else {}),
    )


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
