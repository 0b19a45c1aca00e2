"""A head start: the read plan's first rows preprocessed in the reading process while the
actor pool starts.

Contract: for a run whose worker keeps no local shuffle buffer, the batches of a head
start (train/early_stream.py `head_started`) are the batches the whole plan gives
through the actor pool (`batch_stream` over `build_train_dataset`): the same rows, in
the same order, cut into the same batches of exactly train.batch_size (the last short
one dropped). The plan's first `head_start_chunks` chunks are preprocessed here, by the
same `Preprocess` the actors run, and the Dataset reads the plan from the next chunk on.

Why: each preprocessing actor starts in a new Ray worker process that imports Ray and
Ray Data before its constructor runs, 1.2-1.7 s on 2 cores, and the first batch of the
ImageNet-like stream came 1.8-3.0 s after iteration began (issue 30; stop 43-46 traces
in docs/benchmarks/input-pipeline.md). The reading process has all of that imported
already, and the decoder releases the GIL, so its first batch needs one call's decode.

Left out, so that no run's batches change: a worker's local shuffle buffer (its order
depends on the blocks it saw), paced reads (source.max_rows_ahead: the actors wait for
the workers' heartbeats) and text (a read unit's rows are not chunk_size).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from echoray.config import PipelineConfig
from echoray.data.plan import chunks_per_call, plan_chunks, plan_rows
from echoray.data.sources import SourceIndex
from echoray.echo_plan import shuffle_buffer_rows

Batch = dict[str, np.ndarray]


def head_start_chunks(cfg: PipelineConfig, idx: SourceIndex, first_epoch: int = 0) -> int:
    """Plan chunks the reading process preprocesses itself: preprocess.head_start_rows (by
    default train.batch_size, the first batch) rounded up to whole actor calls, at most the
    plan; 0 where a head start is left out.

    Why one batch by default: the pool's actors wait on the run's consumer once their
    output queue is full, and the consumer takes the head first, so a head longer than
    what the actors' start-up hides leaves their cores idle. On the ImageNet-like JPEGs
    (benchmarks/results/input_pipeline_quiet_head_sizes.json, 3 repeats side by side) the
    first epoch took 4.13 s with a 64-row head (one batch), 4.14 s with none, 4.27 s with
    1,024 rows and 4.33 s with 256, at the same steady rate (1,202-1,251 images/s), and
    every head gave the first batch in 0.44-0.56 s against 2.09-2.22 s without one."""
    rows = cfg.preprocess.head_start_rows
    if rows is None:
        rows = cfg.train.batch_size
    if not rows or shuffle_buffer_rows(cfg) or cfg.source.max_rows_ahead or idx.kind == "text":
        return 0
    per_call = chunks_per_call(cfg)
    calls = -(-rows // (per_call * cfg.source.chunk_size))
    planned = plan_chunks(idx, cfg.source.chunk_size) * max(0, cfg.train.max_epochs - first_epoch)
    return min(calls * per_call, planned)


def head_rows(cfg: PipelineConfig, idx: SourceIndex, first_epoch: int, n_chunks: int) -> Batch:
    """The plan's first `n_chunks` {"epoch", "chunk"} rows (those build_train_dataset skips),
    made from only the passes they span: it runs before the first batch."""
    per_pass = plan_chunks(idx, cfg.source.chunk_size)
    last = min(cfg.train.max_epochs, first_epoch + -(-n_chunks // max(per_pass, 1)))
    rows = plan_rows(cfg.seed, last, per_pass, first_epoch)
    return {k: v[:n_chunks] for k, v in rows.items()}


def preprocess_calls(stage, plan: Batch, per_call: int) -> Iterator[Batch]:
    """`stage` (data/stages.py Preprocess) over `plan`'s rows, `per_call` at a time, as the
    actor pool calls it: the rows each call yields, in plan order."""
    for start in range(0, len(plan["chunk"]), per_call):
        yield from stage({k: v[start : start + per_call] for k, v in plan.items()})


