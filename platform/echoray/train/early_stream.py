"""A worker's training stream, asked for its first batch before the worker does anything else.

The first batch of a run waits for Ray Data to start its coordinator and its
preprocessing actor, each a new process (the actor imports torch): 4-5 s on 2 cores
(Ray timeline of `echoray train`, docs/benchmarks/startup.md). Asking for it in a
thread as soon as the worker has its shard overlaps that with what the worker does
meanwhile: importing torch and the loop, building the model and the held-out set.
This module stays import-light (no torch) for that reason.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future

from echoray.config import PipelineConfig
from echoray.echo_plan import stream_buffer_rows
from echoray.seeds import STREAM_SAMPLER, derive_seed


def batch_stream(data, cfg: PipelineConfig, group: int) -> Iterable[dict]:
    """The batches a reading worker takes from `data` (its Ray Train shard, or the Dataset
    of a run trained in process): exact sizes, a seeded local shuffle per group, also
    where the worker echoes at consumption time (its pool then mixes shuffled rows). The
    shuffle is data/shuffle_buffer.py's over whole blocks, as every reader's.

    The pool alone is not a shuffle: it is topped up a batch at a time, so it holds the
    last few hundred rows of the stream in stream order. A text read plan cuts files into
    byte ranges, and without the local shuffle (which holds whole blocks, a call's rows)
    every batch of `auto` came from a few kilobytes of one document: on
    benchmarks/lm_auto_echo.py `auto` needed 489-619 steps to the target where e = 8
    needed 208-312 at a higher mean factor (benchmarks/results/lm_auto_echo.json at
    commit 694fa74). Feeding the pool whole blocks instead (so its first batch needs one
    call, not the 400 fresh rows the shuffle holds first) mixed too little as well: 241-534
    steps, and 13.2 s of training to the target where e = 8 took 7.6
    (benchmarks/results/lm_auto_echo_whole_blocks.json).

    prefetch_batches=0: Ray Data's read-ahead window (prefetch_batches_locally) yields a
    block only once it holds the next one, so each block reached the worker one actor
    call late: on that benchmark (1-4 s a call) e = 8 read 577 sequences before its
    first step, and 281 without the window. StartedStream asks for the next batch in its
    own thread instead, as soon as it hands one out."""
    from echoray.data.shuffle_buffer import shuffled_batches

    seed = derive_seed(cfg.seed, STREAM_SAMPLER, group)
    buffer = stream_buffer_rows(cfg)
    if not buffer:  # Ray Data cuts the batches: a block's rows stay in Arrow until then
        return data.iter_batches(batch_size=cfg.train.batch_size, batch_format="numpy", drop_last=True,
                                 prefetch_batches=0)
    # whole blocks, shuffled and cut here (data/shuffle_buffer.py: Ray Data's local shuffle
    # cost the reading thread about 0.5 ms a batch, the limit for small rows)
    blocks = data.iter_batches(batch_size=None, batch_format="numpy", prefetch_batches=0)
    return shuffled_batches(blocks, cfg.train.batch_size, buffer, seed)


def head_started(cfg: PipelineConfig, idx, collector=None, first_epoch: int = 0, consumed=None,
                 group: int = 0) -> Iterator[dict]:
    """A reading process's batches of the run's plan (first_epoch on, without `consumed`):
    with a head start (data/head_start.py) the plan's first rows preprocessed here while
    the actor pool starts on the rest, else batch_stream over the whole plan's Dataset.
    The same batches either way (with the stream in plan order, preprocess.deterministic),
    through the same seeded shuffle buffer; the Dataset is built at the first next()."""
    from echoray.data.head_start import (
        head_rows,
        head_start_chunks,
        head_threads,
        preprocess_calls,
        threaded_calls,
    )
    from echoray.data.pipeline import build_train_dataset
    from echoray.data.plan import chunks_per_call
    from echoray.data.preprocess_args import preprocess_args
    from echoray.data.shuffle_buffer import rows_before_first_batch, shuffled_batches
    from echoray.data.stages import Preprocess

    chunks = head_start_chunks(cfg, idx, first_epoch)
    ds = build_train_dataset(cfg, idx, collector, first_epoch, consumed, head_chunks=chunks)
    ds.context.execution_options.preserve_order = cfg.preprocess.deterministic  # as train/trainer.py asks
    if not chunks:
        yield from batch_stream(ds, cfg, group)
        return
    # The pool starts in StartedStream's thread: now, or once the head has made
    # preprocess.head_start_pool_at rows. Its blocks come whole, cut below, and its later
    # blocks are pulled when needed: a pull ahead made closing wait for a block no one
    # wanted (digits behind the store, a 900-chunk plan block's next MiB: 6 s at a run's end).
    rest = DeferredStream(lambda: StartedStream(
        ds.iter_batches(batch_size=None, batch_format="numpy", prefetch_batches=0), ahead=False))
    pool_at = cfg.preprocess.head_start_pool_at
    try:
        args = dataclasses.replace(preprocess_args(cfg, idx, collector, consumed), in_pool=False)
        plan, per_call = head_rows(cfg, idx, first_epoch, chunks), chunks_per_call(cfg)
        buffer = stream_buffer_rows(cfg)
        if pool_at is None:
            rest.start()
            calls = preprocess_calls(Preprocess(args), plan, per_call)
            # the first batch's rows (with a shuffle buffer, its fill) at this thread's priority
            first = _rows_for(calls, rows_before_first_batch(buffer, cfg.train.batch_size))
            head = itertools.chain(first, in_idle_thread(calls))
        else:  # the head on the pool's CPUs until it has made pool_at rows
            head = _start_after(threaded_calls(lambda: Preprocess(args), plan, per_call, head_threads(cfg)),
                                pool_at, rest.start)
        blocks = itertools.chain(head, rest)
        yield from shuffled_batches(blocks, cfg.train.batch_size, buffer, derive_seed(cfg.seed, STREAM_SAMPLER, group))
    finally:
        rest.close()


def _start_after(blocks: Iterator[dict], rows: int, start: Callable[[], None]) -> Iterator[dict]:
    """`blocks` handed on, start() called once they have held `rows` rows (before the first
    block where rows is 0; never where they hold fewer)."""
    made = 0
    if rows <= 0:
        start()
    for block in blocks:
        yield block
        made += len(block["sample_id"])
        if made >= rows:
            start()


class DeferredStream:
    """A StartedStream made by `make` at start() or at the first iteration, whichever is
    first; close() closes it if it was made."""

    def __init__(self, make: Callable[[], StartedStream]):
        self._make, self._stream = make, None

    def start(self) -> None:
        if self._stream is None:
            self._stream = self._make()

    def __iter__(self) -> Iterator[dict]:
        self.start()
        yield from self._stream

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()


def _rows_for(blocks: Iterator[dict], n: int) -> list[dict]:
    """Blocks taken from `blocks` until they hold `n` rows (or it ends)."""
    taken: list[dict] = []
    while sum(len(b["sample_id"]) for b in taken) < n and (block := next(blocks, None)) is not None:
        taken.append(block)
    return taken


def in_idle_thread(items: Iterable[dict], nice: int = 19) -> Iterator[dict]:
    """`items` made in a thread of its own at the lowest CPU priority (Linux: a thread's
    nice value), handed over as they come; closed, the thread makes no more."""
    import os
    import queue

    q: queue.Queue = queue.Queue()
    end, stop = object(), threading.Event()

    def run() -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
        except OSError:
            pass
        try:
            for item in items:
                if stop.is_set():  # the consumer closed: make no more
                    return
                q.put(item)
            q.put(end)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
            q.put(exc)

    threading.Thread(target=run, name="echoray-head-start", daemon=True).start()
    try:
        while (item := q.get()) is not end:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def start_worker_stream(config: dict) -> StartedStream | None:
    """In a Ray Train worker: its shard's stream, started. None in grouped batch augmentation,
    where only a group's first worker reads (train/groups.py decides after torch loads)."""
    import ray.train

    cfg = PipelineConfig.model_validate(config["cfg"])
    if cfg.batch_augmentation.mode != "local":
        return None
    # local batch augmentation: a worker's group is its rank (local mode: rank 0 of 1)
    rank = 0 if config.get("local_mode") else ray.train.get_context().get_world_rank()
    return StartedStream(batch_stream(ray.train.get_dataset_shard("train"), cfg, rank))


class StartedStream:
    """An iterable whose first item is asked for at once, in a thread, and each next one as
    soon as the one before is handed out (one in flight); `poll()` says whether it is here,
    so a consumer can train on while it comes (echo.fill_waits). With `ahead=False` only the
    first item is asked for ahead (which starts the stream), the rest at each next()."""

    def __init__(self, batches: Iterable[dict], ahead: bool = True):
        self._it = iter(batches)
        self._ahead = ahead
        self._next: Future | None = self._ask()

    def _ask(self) -> Future:
        """next(stream) in a daemon thread (one in flight at a time: the stream's own thread
        safety is not needed); a daemon, so a request left out at exit does not hold the process."""
        out: Future = Future()

        def run() -> None:
            if out.set_running_or_notify_cancel():
                try:
                    out.set_result(next(self._it, None))
                except BaseException as exc:  # noqa: BLE001 - re-raised by result() in the consumer
                    out.set_exception(exc)

        threading.Thread(target=run, name="echoray-next-batch", daemon=True).start()
        return out

    def poll(self) -> bool:
        """Whether the next item is here now (the end counts); asks for it if no request is out."""
        if self._next is None:
            self._next = self._ask()
        return self._next.done()

    def __iter__(self) -> Iterator[dict]:
        while True:
            if self._next is not None:  # asked for ahead: the thread's result
                item, self._next = self._next.result(), None
            else:
                item = next(self._it, None)
            if item is None:
                return
            if self._ahead:
                self._next = self._ask()  # the next one comes while this one trains
            yield item

    def close(self) -> None:
        """Close the stream once the request in flight, if any, has returned (a run that
        reached its target leaves it unfinished; in a reused process its preprocessing
        actor would live on)."""
        if self._next is not None:
            self._next.cancel()
            if not self._next.cancelled():
                self._next.exception()  # wait: the thread must not pull from a closed stream
        close = getattr(self._it, "close", None)
        if close is not None:
            close()
