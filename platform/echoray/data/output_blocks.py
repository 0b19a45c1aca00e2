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

Once a block is made, the actor holds it until the executor (a thread of the consuming
process) takes it: Ray Data lets a map task's generator run at most
`_max_num_blocks_in_streaming_gen_buffer` blocks ahead of the executor, 2 by default, and
an actor at that limit waits. On the ImageNet-like JPEG set (2,000 files, 2 actors, 20 s
of `bench_input`, nothing else running, 4 runs a setting) the two actors used 1.56 CPUs of 2
and the machine 1.84, at 920-948 images/s; with 4, 8 or 16 blocks they used 1.67-1.72
and the machine 1.99, at 979-1,055 images/s. GENERATOR_BUFFER_BLOCKS is the least of
those. A task then holds at most 4 calls' rows in the object store, 2 more than Ray
Data's default (38 MB for 64 crops of 224x224). Set with the block target, so only where blocks are one call's
rows (images); text keeps Ray Data's default.
"""

from __future__ import annotations

from echoray.data.op_shapes import output_size

INT64_COLUMNS = 6  # epoch, sample_id, label, echo_copy, echo_copies, aug_key
UNDER = 0.9  # the target's share of one call's output: a short call (bad files skipped) joins the next
DEFAULT_TARGET = 128 * 1024 * 1024  # Ray Data's DataContext.target_max_block_size
MIN_BLOCK_BYTES = 1024 * 1024  # smaller blocks cap the stream (the measurement above)
GENERATOR_BUFFER_BLOCKS = 4  # blocks a map task may run ahead of the executor (Ray Data: 2)


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
    """Set `target` (from pipeline_block_target) on a Dataset's DataContext, with the
    generator buffer that lets an actor keep working while the executor is busy; None
    leaves Ray Data's defaults (text)."""
    if target is None:
        return
    ctx.target_max_block_size = target
    ctx._max_num_blocks_in_streaming_gen_buffer = GENERATOR_BUFFER_BLOCKS  # no public setter (Ray 2.60)
