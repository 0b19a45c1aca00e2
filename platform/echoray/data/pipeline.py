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
from echoray.echo_plan import EchoPlan, shuffle_buffer_rows, stream_buffer_rows


def plan_block_chunks(planned_chunks: int, max_actors: int, max_chunks: int = 4096) -> int:
    """Chunks per read-plan block. An actor works through a block in one task, so a plan
    held in one block kept all but one actor idle (2,000 JPEGs, one epoch, 2 actors: one
    busy): at least 4 blocks per actor over the plan, at most 4096 chunks a block (each
    block costs Ray Data a metadata task when the Dataset is made), at most `max_chunks`."""
    return max(1, min(4096, max_chunks, -(-planned_chunks // (4 * max_actors))))


def rows_ahead_floor(cfg: PipelineConfig, block_rows: int) -> int:
    """The least source.max_rows_ahead that cannot starve the workers: every worker's
    shuffle buffer, its echo pool where it echoes at consumption time and fills the pool
    before every batch (the pool's rows fill up behind the shuffle buffer, at e = 1 all
    fresh), and prefetched batches, plus two map tasks per actor. With echo.fill_waits the
    pool makes a batch from what it holds, so it cannot hold the actors back by waiting
    to fill: it is not counted."""
    plan = EchoPlan.from_config(cfg)
    buffers = 2 if plan.at_consumption and not plan.fills_waits else 1
    per_worker = buffers * (shuffle_buffer_rows(cfg) or 0) + 8 * cfg.train.batch_size  # Ray Data prefetch, the packer's carry, rows not yet reported
    return cfg.scaling.num_workers * per_worker + 2 * block_rows * cfg.preprocess.actors.max_size


def block_rows(idx: SourceIndex, n_chunks: int, block_chunks: int) -> int:
    """Rows a block of `block_chunks` plan chunks holds, on average. A text chunk is a read
    unit of many sequences (204 on average in benchmarks/lm_auto_echo.py's corpus), not
    source.chunk_size (1) rows: counted as 2 rows a block, rows_ahead_floor let about 1.5
    blocks run ahead there, so a call of several seconds started only when the worker had
    nearly run dry."""
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
    need = cfg.scaling.num_workers * rows_before_first_batch(buffer, cfg.train.batch_size)
    return max(floor, min(MAX_FIRST_BLOCKS, -(-int(need) // max(1, rows_per_call))))


def head_block_count(cfg: PipelineConfig, rows_per_call: int) -> int:
    """One-call blocks the plan keeps at its start, before first_block_count's, for a head
    start under a shuffle buffer (data/head_start.py): as many as the reader's first fill,
    which the head reads in its own process; 0 without a buffer or with the head start
    off. A head that took the pool's own one-call blocks left the pool to start on a
    plan block of 900 chunks (digits behind the store, 40 epochs planned), whose rows
    left the actor a MiB at a time: one run's second batch came 33 s after its first."""
    buffer = stream_buffer_rows(cfg)
    if not buffer or cfg.preprocess.head_start_rows == 0:
        return 0
    fill = rows_before_first_batch(buffer, cfg.train.batch_size)
    return min(MAX_FIRST_BLOCKS, -(-int(fill) // max(1, rows_per_call)))


def block_layout(cfg: PipelineConfig, idx: SourceIndex, first_epoch: int = 0) -> tuple[int, int]:
    """(chunks a plan block holds, chunks each of the first one-call blocks holds)."""
    planned = plan_chunks(idx, cfg.source.chunk_size) * max(0, cfg.train.max_epochs - first_epoch)
    per_call = chunks_per_call(cfg)
    # A source read file by file decodes photos: a block of 214 chunks (6,848 images, 2 actors,
    # 600 files x 90 epochs) was a minute of one core, its rows leaving in 128 MiB pieces
    # (~850 images) and batches arriving in bursts; at most 8 actor calls a block there.
    block_chunks = plan_block_chunks(planned, cfg.preprocess.actors.max_size,
                                     8 * per_call if idx.shuffled_reads else 4096)
    if cfg.source.max_rows_ahead:  # a map task emits its rows when it ends: keep tasks small
        block_chunks = min(block_chunks, per_call)
    # One-call blocks first (first_block_count): a map task emits its rows when it ends, so
    # the first rows reach the workers after one actor call (64 images), not a whole block.
    return block_chunks, min(per_call, block_chunks)


def build_train_dataset(cfg: PipelineConfig, idx: SourceIndex, collector=None, first_epoch: int = 0,
                        consumed: dict[int, np.ndarray] | None = None, head_chunks: int = 0) -> ray.data.Dataset:
    """The stream of plan epochs first_epoch.. without the `consumed` rows (a restored run)
    and without the plan's first `head_chunks` chunks (read in the consumer's process:
    data/head_start.py)."""
    n_chunks = plan_chunks(idx, cfg.source.chunk_size)
    a = cfg.preprocess.actors
    per_call = chunks_per_call(cfg)
    block_chunks, first_chunks = block_layout(cfg, idx, first_epoch)
    max_ahead = None
    if cfg.source.max_rows_ahead:
        max_ahead = max(cfg.source.max_rows_ahead, rows_ahead_floor(cfg, block_rows(idx, n_chunks, block_chunks)))
    blocks = read_plan(cfg.seed, cfg.train.max_epochs, n_chunks, first_epoch=first_epoch,
                       block_chunks=block_chunks, first_chunks=first_chunks,
                       n_first=sum(count(cfg, block_rows(idx, n_chunks, first_chunks))
                                   for count in (head_block_count, first_block_count)),
                       # a shuffle buffer's draws follow the blocks it is given: a head start's
                       # blocks are the plan's first, and the pool's keep the whole plan's bounds
                       skip_chunks=head_chunks, keep_boundaries=bool(stream_buffer_rows(cfg)))
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
        fn_constructor_args=(preprocess_args(cfg, idx, collector, consumed, max_ahead),),
        batch_size=per_call,
        compute=ActorPoolStrategy(min_size=a.min_size, max_size=a.max_size),
        num_cpus=a.num_cpus,
        udf_modifying_row_count=True,  # reads expand chunks; echo repeats rows; replays drop rows
        **({"resources": dict(a.resources)} if a.resources else {}),
    )
    # each call's rows leave the actor as it returns (data/output_blocks.py)
    apply_block_target(ds.context, pipeline_block_target(cfg, idx, per_call))
    return ds

