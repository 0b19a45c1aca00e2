"""The size of the blocks leaving a preprocessing actor: one actor call's rows, and at
least MIN_BLOCK_BYTES.

Contract: image rows leave an actor as each call returns, one call's rows a block (a
block over 1.5x the target, an echo in the actor, is cut into target-sized blocks),
whatever the number of calls in a map task; text keeps Ray Data's default. Ray Data
packs a map task's output into blocks of the public `DataContext.target_max_block_size`
(128 MiB by default) and sends one on only when it is full or the task ends, so a plan
block of many small calls would reach the workers in one piece, when its task ended.
Why the 1 MiB floor: a block costs the executor a round trip, and smaller blocks capped
the stream (docs/benchmarks/index.md, "The block-size floor, side by side again").
"""

from __future__ import annotations

from echoray.data.op_shapes import output_size

INT64_COLUMNS = 6  # epoch, sample_id, label, echo_copy, echo_copies, aug_key
UNDER = 0.9  # the target's share of one call's output: a short call (bad files skipped) joins the next
DEFAULT_TARGET = 128 * 1024 * 1024  # Ray Data's DataContext.target_max_block_size
MIN_BLOCK_BYTES = 1024 * 1024  # smaller blocks capped the stream (the page named above)


def row_bytes(side: int, channels: int) -> int:
    """Bytes of one image row in Arrow: the uint8 image and the int64 columns."""
    return side * side * channels + 8 * INT64_COLUMNS


def call_block_target(rows_per_call: int, side: int | None, channels: int) -> int | None:
    """target_max_block_size for blocks of one call's rows, at least MIN_BLOCK_BYTES (None:
    rows of no fixed size). An output over 1.5x the target (an echo in the actor) is cut
    into target-sized blocks."""
    if side is None or rows_per_call <= 0:
        return None
    one_call = int(UNDER * rows_per_call * row_bytes(side, channels))
    return max(1, min(DEFAULT_TARGET, max(MIN_BLOCK_BYTES, one_call)))


def pipeline_block_target(cfg, idx, calls_chunks: int) -> int | None:
    """call_block_target for the training Dataset of cfg over idx, one call reading
    `calls_chunks` chunks. None for text (a read unit packs an unknown number of rows):
    Ray Data's default then."""
    if idx.kind == "text":
        return None
    aug = cfg.preprocess.augment
    side = idx.image_size
    if aug.on == "cpu" and aug.ops:
        side = output_size(side, aug.ops)
    return call_block_target(calls_chunks * cfg.source.chunk_size, side, idx.channels)


def apply_block_target(ctx, target: int | None) -> None:
    """Set `target` (from pipeline_block_target) on a Dataset's DataContext; None leaves
    Ray Data's default (text)."""
    if target is not None:
        ctx.target_max_block_size = target
