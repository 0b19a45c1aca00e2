"""A head start: the read plan's first rows preprocessed in the reading process while the
actor pool starts.

Contract: the batches of a head start (train/early_stream.py `head_started`) are the
batches the whole plan gives through the actor pool (`batch_stream` over
`build_train_dataset`, in plan order): the same rows, in the same order, cut into the
same batches of exactly train.batch_size (the last short one dropped), also through a
worker's local shuffle buffer. The plan's first `head_start_chunks` chunks are
preprocessed here, by the same `Preprocess` the actors run, one actor call's rows a
block, and the Dataset reads the plan from the next chunk on. A shuffle buffer's draws
follow the blocks it is given, so there the head is at most the one-call blocks the plan
keeps at its start for it, and the pool's blocks keep the whole plan's bounds
(data/plan.py read_plan `keep_boundaries`).

Why: each preprocessing actor starts in a new Ray worker process that imports Ray and
Ray Data before its constructor runs, 1.2-1.7 s on 2 cores, and the first batch of the
ImageNet-like stream came 1.8-3.0 s after iteration began (issue 30; stop 43-46 traces
in docs/benchmarks/input-pipeline.md). The reading process has all of that imported
already, and the decoder releases the GIL, so its first batch needs one call's decode.
Behind a slow store (digits at 27.8 ms a request, one request in flight) the head's
reads start as soon as the plan is made, not once the actor has started.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from echoray.config import PipelineConfig
from echoray.data.plan import chunks_per_call, plan_chunks, plan_rows
from echoray.data.shuffle_buffer import rows_before_first_batch
from echoray.data.sources import SourceIndex
from echoray.echo_plan import stream_buffer_rows

Batch = dict[str, np.ndarray]


def head_start_chunks(cfg: PipelineConfig, idx: SourceIndex, first_epoch: int = 0) -> int:
    """Plan chunks the reading process preprocesses itself: preprocess.head_start_rows rounded
    up to whole actor calls, at most the plan; by default the rows the reader holds before
    its first batch (train.batch_size, or its shuffle buffer's fill). Where the reader
    shuffles, at most the one-call blocks the plan keeps for it (data/pipeline.py
    head_block_count), so the pool still starts on one-call blocks of its own.

    Why one batch by default where nothing is shuffled: the pool's actors wait on the
    run's consumer once their output queue is full, and the consumer takes the head
    first, so a head longer than what the actors' start-up hides leaves their cores idle.
    On the ImageNet-like JPEGs (benchmarks/results/input_pipeline_quiet_head_sizes.json, 3
    repeats side by side) the first epoch took 4.13 s with a 64-row head (one batch),
    4.14 s with none, 4.27 s with 1,024 rows and 4.33 s with 256, at the same steady rate
    (1,202-1,251 images/s), and every head gave the first batch in 0.44-0.56 s against
    2.09-2.22 s without one. Where the reader shuffles, its first batch waits for the
    buffer's fill, so that much is the head."""
    from echoray.data.pipeline import block_layout, block_rows, head_block_count

    buffer = stream_buffer_rows(cfg)
    rows = cfg.preprocess.head_start_rows
    if rows is None:
        rows = rows_before_first_batch(buffer, cfg.train.batch_size)
    if not rows:
        return 0
    per_call = chunks_per_call(cfg)
    n_chunks = plan_chunks(idx, cfg.source.chunk_size)
    planned = n_chunks * max(0, cfg.train.max_epochs - first_epoch)
    calls = _calls_for(cfg, idx, first_epoch, rows, per_call, n_chunks, planned)
    if buffer:  # the head's calls must be the plan's first one-call blocks
        if block_layout(cfg, idx, first_epoch)[1] != per_call:
            return 0
        calls = min(calls, head_block_count(cfg, block_rows(idx, n_chunks, per_call)))
    return min(calls * per_call, planned)


def _calls_for(cfg: PipelineConfig, idx: SourceIndex, first_epoch: int, rows: int, per_call: int,
               n_chunks: int, planned: int) -> int:
    """Actor calls over the plan's first chunks that read at least `rows` rows: chunk_size
    rows a chunk, or a text unit's sequences (the index counted them)."""
    if idx.kind != "text":
        return -(-rows // (per_call * cfg.source.chunk_size))
    base = idx.details["train_base"]
    passes = min(cfg.train.max_epochs, first_epoch + 1 + -(-rows // max(1, int(base[-1]))))
    units = plan_rows(cfg.seed, passes, n_chunks, first_epoch)["chunk"][:planned]
    read = np.cumsum(base[units + 1] - base[units])
    needed = int(np.searchsorted(read, rows)) + 1  # units up to the one that reaches `rows`
    return -(-min(needed, len(units)) // per_call)


def head_rows(cfg: PipelineConfig, idx: SourceIndex, first_epoch: int, n_chunks: int) -> Batch:
    """The plan's first `n_chunks` {"epoch", "chunk"} rows (those build_train_dataset skips),
    made from only the passes they span: it runs before the first batch."""
    per_pass = plan_chunks(idx, cfg.source.chunk_size)
    last = min(cfg.train.max_epochs, first_epoch + -(-n_chunks // max(per_pass, 1)))
    rows = plan_rows(cfg.seed, last, per_pass, first_epoch)
    return {k: v[:n_chunks] for k, v in rows.items()}


def call_rows(plan: Batch, per_call: int) -> Iterator[Batch]:
    """`plan`'s rows `per_call` at a time, as the actor pool is given them."""
    for start in range(0, len(plan["chunk"]), per_call):
        yield {k: v[start : start + per_call] for k, v in plan.items()}


def preprocess_calls(stage, plan: Batch, per_call: int) -> Iterator[Batch]:
    """`stage` (data/stages.py Preprocess) over `plan`'s rows, `per_call` at a time, as the
    actor pool calls it: the rows each call yields, in plan order."""
    for rows in call_rows(plan, per_call):
        yield from stage(rows)


def head_threads(cfg: PipelineConfig) -> int:
    """Threads a head start that starts the pool later (preprocess.head_start_pool_at) runs
    its calls in: the CPUs the pool will take, which are idle until it starts."""
    a = cfg.preprocess.actors
    return max(1, math.ceil(a.max_size * a.num_cpus))


def threaded_calls(make_stage: Callable[[], Callable], plan: Batch, per_call: int, threads: int) -> Iterator[Batch]:
    """preprocess_calls over `threads` threads, each with a stage of its own (make_stage()):
    the same blocks in the same order, at most two calls a thread in flight; closed, the
    calls not started are cancelled.

    Why threads: the decode and the crop's resize release the GIL. Measured on the
    ImageNet-like JPEGs (1,980 rows, the first epoch's plan), one process: 622-768 rows a
    second with one thread, 1,225-1,435 with two, at the same CPU per row."""
    local = threading.local()

    def call(rows: Batch) -> list[Batch]:
        if not hasattr(local, "stage"):
            local.stage = make_stage()
        return list(local.stage(rows))

    pending: deque = deque()
    with ThreadPoolExecutor(threads, thread_name_prefix="echoray-head") as pool:
        try:
            for rows in call_rows(plan, per_call):
                pending.append(pool.submit(call, rows))
                if len(pending) >= 2 * threads:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()
