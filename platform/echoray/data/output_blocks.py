"""The size of the blocks leaving a preprocessing actor: one actor call's rows, and at
least MIN_BLOCK_BYTES.

Ray Data packs what a map task yields into output blocks of the Dataset's
`target_max_block_size` (128 MiB by default) and sends a block on only when it is full
or the task ends. One call's 128 rows of 16x16 digits are 33 KB, so a read-plan block of
900 chunks (digits behind the emulated store, 40 epochs planned: 14,400 rows, 25 s of
reads at 27.8 ms per 16-sample request) left its actor as one block when the whole task
ended, and the first batch waited for it. With the target just under one call's output
every call's rows are a block of their own, sent on as the call returns (map tasks are
streaming generators), however many calls a task makes: the plan's block sizes then
only balance the actors.

But a block costs a round trip: a map task's generator holds at most two unconsumed
blocks (Ray Data's streaming-generator backpressure) until the executor takes them, so
tiny blocks cap the stream whatever the actors can do. The digits pipeline alone (2
actors, `iter_batches(256)`, quiet machine) delivered 1,520 rows/s with 33 KB blocks,
16,200 with 256 KiB, 30,000 with 512 KiB, 53,400 with 1 MiB, 46,600 with 4 MiB and
49,600 with Ray Data's default. Hence the floor of 1 MiB: rows this small leave the actor
every ~3,900 rows, and a photo call (64 crops of 224x224, 9.6 MB) is still one block.
The first batch does not wait for it: the read plan's first blocks are one call each.
"""

from __future__ import annotations

from echoray.data.op_shapes import output_size

INT64_COLUMNS = 6  # epoch, sample_id, label, echo_copy, echo_copies, aug_key
UNDER = 0.9  # the target's share of one call's output: a short call (bad files skipped) joins the next
DEFAULT_TARGET = 128 * 1024 * 1024  # Ray Data's DataContext.target_max_block_size
MIN_BLOCK_BYTES = 1024 * 1024  # smaller blocks cap the stream (the measurement above)


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
