"""A worker's training stream, asked for its first batch before the worker does anything else.

The first batch of a run waits for Ray Data to start its coordinator and its
preprocessing actor, each a new process (the actor imports torch): 4-5 s on 2 cores
(Ray timeline of `echoray train`, docs/benchmarks/startup.md). Asking for it in a
thread as soon as the worker has its shard overlaps that with what the worker does
meanwhile: importing torch and the loop, building the model and the held-out set.
This module stays import-light (no torch) for that reason.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
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
    so a consumer can train on while it comes (spare copies under auto)."""

    def __init__(self, batches: Iterable[dict]):
        self._it = iter(batches)
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
