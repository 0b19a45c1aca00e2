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
from echoray.data.output_blocks import apply_block_target, pipeline_block_target
from echoray.data.plan import chunks_per_call, num_chunks, plan_chunks, read_plan  # noqa: F401 - num_chunks re-exported
from echoray.data.preprocess_args import preprocess_args
from echoray.data.shuffle_buffer import rows_before_first_batch
from echoray.data.sources import SourceIndex
from echoray.data.stages import Preprocess
from echoray.echo_plan import stream_buffer_rows


def plan_block_chunks(planned_chunks: int, max_actors: int, max_chunks: int = 4096) -> int:
    """Chunks per read-plan block. An actor works through a block in one task, so a plan
    held in one block kept all but one actor idle (2,000 JPEGs, one epoch, 2 actors: one
    busy): at least 4 blocks per actor over the plan, at most 4096 chunks a block (each
    block costs Ray Data a metadata task when the Dataset is made), at most `max_chunks`."""
    return max(1, min(4096, max_chunks, -(-planned_chunks // (4 * max_actors))))


def block_rows(idx: SourceIndex, n_chunks: int, block_chunks: int) -> int:
    """Rows a block of `block_chunks` plan chunks holds, on average: chunk_size rows a chunk,
    or a text read unit's sequences (many rows: the index counted them)."""
    return block_chunks * -(-len(idx.train_ids) // max(n_chunks, 1))


MAX_FIRST_BLOCKS = 64  # one-call blocks cost a task each: a bound for very large buffers


def first_block_count(cfg: PipelineConfig, rows_per_call: int) -> int:
    """One-call blocks at the plan's start: two per actor, and where the workers keep a
    local shuffle buffer, enough calls for every worker's first batch (the rows its
    buffer holds first, data/shuffle_buffer.py).
    A map task's rows reach the stream when it ends or fills an output block (1 MiB,
    data/output_blocks.py), so where the first batch needed more rows than the first two
    calls made, it waited for a whole plan block: digits (512-row shuffle buffer, 128-row
    calls) behind a store of 10 ms a sample read all 1,024 samples of a 2-epoch run
    before its first step."""
    floor = 2 * cfg.preprocess.actors.max_size
    buffer = stream_buffer_rows(cfg)
    if not buffer:  # no shuffle buffer (the image pipelines): a batch is a few calls' rows
        return floor
    need = cfg.scaling.max_workers * rows_before_first_batch(buffer, cfg.train.batch_size)
    return max(floor, min(MAX_FIRST_BLOCKS, -(-int(need) // max(1, rows_per_call))))


def block_layout(cfg: PipelineConfig, idx: SourceIndex, first_epoch: int = 0) -> tuple[int, int]:
    """(chunks a plan block holds, chunks each of the first one-call blocks holds)."""
    planned = plan_chunks(idx, cfg.source.chunk_size) * max(0, cfg.train.max_epochs - first_epoch)
    per_call = chunks_per_call(cfg)
    # A source read file by file decodes photos: a block of 214 chunks (6,848 images, 2 actors,
    # 600 files x 90 epochs) was a minute of one core, its rows leaving in 128 MiB pieces
    # (~850 images) and batches arriving in bursts; at most 8 actor calls a block there.
    block_chunks = plan_block_chunks(planned, cfg.preprocess.actors.max_size,
                                     8 * per_call if idx.shuffled_reads else 4096)
    # One-call blocks first (first_block_count): a map task emits its rows when it ends, so
    # the first rows reach the workers after one actor call (64 images), not a whole block.
    return block_chunks, min(per_call, block_chunks)


def build_train_dataset(cfg: PipelineConfig, idx: SourceIndex, collector=None, first_epoch: int = 0,
                        consumed: dict[int, np.ndarray] | None = None) -> ray.data.Dataset:
    """The stream of plan epochs first_epoch.. without the `consumed` rows (a restored run)."""
    n_chunks = plan_chunks(idx, cfg.source.chunk_size)
    a = cfg.preprocess.actors
    per_call = chunks_per_call(cfg)
    block_chunks, first_chunks = block_layout(cfg, idx, first_epoch)
    blocks = read_plan(cfg.seed, cfg.train.max_epochs, n_chunks, first_epoch=first_epoch,
                       block_chunks=block_chunks, first_chunks=first_chunks,
                       n_first=first_block_count(cfg, block_rows(idx, n_chunks, first_chunks)))
    if not blocks:  # restored after the last epoch: nothing left to read
        blocks = [{"epoch": np.zeros(0, np.int64), "chunk": np.zeros(0, np.int64)}]
    # from_blocks, not from_arrow: from_arrow gets each block's metadata from a 1-CPU Ray
    # task. This runs in Ray Train's controller (TrainStream) and blocks its event loop:
    # a worker group restarted after a bad-data failure, with the old pipeline's actor
    # still holding its CPU, waited for that task forever on 2 CPUs, and the controller
    # never processed the driver's abort (its worker and placement group stayed; the
    # suite's next run stalled). from_blocks computes the metadata here.
    ds = ray.data.from_blocks([pa.table(b) for b in blocks])
    ds = ds.map_batches(
        Preprocess,
        fn_constructor_args=(preprocess_args(cfg, idx, collector, consumed),),
        batch_size=per_call,
        compute=ActorPoolStrategy(min_size=a.min_size, max_size=a.max_size),
        num_cpus=a.num_cpus,
        udf_modifying_row_count=True,  # reads expand chunks; echo repeats rows; replays drop rows
        **({"resources": dict(a.resources)} if a.resources else {}),
    )
    # each call's rows leave the actor as it returns (data/output_blocks.py)
    apply_block_target(ds.context, pipeline_block_target(cfg, idx, per_call))
    return ds

