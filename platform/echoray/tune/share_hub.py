"""One group's shared preprocessing stream: a Ray actor that produces it once and fans it out.

`StreamHub` runs in a threaded actor (no CPU of its own: its preprocessing actors ask
for theirs, as a trial's would). A producer thread takes the group's read plan through
a fixed pool of preprocessing actors (tune/share_producer.py: data/stages.py Preprocess
with no echo), one plan block per call, in plan order; every call's rows are in the
object store as the call's return value, and their ObjectRefs wait in a StreamWindow
(tune/stream_window.py) until every attached trial has taken them. The producer starts
when the group's first trial starts (`start`: the first window is made while the trial
sets up), waits while the window is full (backpressure: the actors stop two calls
ahead) or when every trial that attached has left, and stops for good, its actors with
it, once every trial of the group has detached or said it will not attach (a finished
attempt of a resumed search). Trials attach, take blocks in order and detach
(tune/share_consumer.py).

The hub also decodes the group's held-out split once (`held_out`: the first trial to ask
waits for the decode, the others for the first) and hands every trial the same object
in the store, so a search's evaluation sets are read and decoded once per group too.

Stalls fail loudly: a trial that takes nothing for train.stall_timeout_s while it holds
the full window back is detached (its next take says why) so the others go on; a trial
that waits that long for a block names the hub's state (tune/share_consumer.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import ray

from echoray.config import PipelineConfig
from echoray.data.held_out import HeldOutReader
from echoray.data.plan import chunks_per_call, plan_chunks, read_plan
from echoray.data.preprocess_args import preprocess_args
from echoray.data.sources import SourceIndex, index_source
from echoray.echo_plan import EchoPlan
from echoray.tune.read_counts import ReadCounter
from echoray.tune.share_producer import ProducerPool
from echoray.tune.stream_window import StreamWindow


@dataclass(frozen=True)
class HubSpec:
    """What a hub is made with (search side: tune/share_plan.py)."""

    group: str  # its ShareGroup's name
    key: str  # the group's upstream key
    config: dict  # a member's pipeline tree: its upstream values are the group's
    trials: tuple[str, ...]  # every trial key of the group
    epochs: int  # plan epochs of the stream (share_groups.stream_epochs)
    window_rows: int  # the window's bound (share_groups.window_rows)
    stall_timeout_s: float  # train.stall_timeout_s of the group's first trial


@dataclass
class ConsumerRecord:
    """One trial's attachment, as the hub's report gives it."""

    trial: str
    start_row: int  # stream row it started at
    rows_taken: int = 0  # rows of the blocks it took
    rows_used: int | None = None  # rows it read into its run (its quota, or fewer when it stopped)
    ended: str | None = None  # why it detached
    attached_at: float = 0.0
    detached_at: float | None = None


@dataclass
class HeldOutRecord:
    """The group's held-out split at one crop size, as the hub's report gives it."""

    out_size: int | None
    rows: int = 0  # held-out images decoded, once (0: none kept, the split is over the cache bound)
    asks: int = 0  # trials that asked for it
    decode_s: float = 0.0
    error: str | None = None


def plan_blocks(cfg: PipelineConfig, idx: SourceIndex, epochs: int) -> Iterator[dict[str, np.ndarray]]:
    """The group's read plan, plan epochs 0..epochs-1, in blocks of one actor call
    (preprocess.batch_size samples), made an epoch at a time: a stream of hundreds of
    epochs of ImageNet's 40,000 chunks is never held whole."""
    n_chunks = plan_chunks(idx, cfg.source.chunk_size)
    per_call = chunks_per_call(cfg)
    for epoch in range(epochs):
        yield from read_plan(cfg.seed, epoch + 1, n_chunks, block_chunks=per_call, first_epoch=epoch)


def producer_pool(cfg: PipelineConfig, idx: SourceIndex, epochs: int) -> ProducerPool:
    """The group's producer (tune/share_producer.py): its read plan through the
    preprocessing actor without echo (EchoPlan shared_stream: the trials echo)."""
    plan = EchoPlan.from_config(cfg, shared_stream=True)
    args = replace(preprocess_args(cfg, idx), echo_before_augment=plan.in_actor_before_augment,
                   echo_after_augment=plan.in_actor_after_augment, echo_factor=plan.actor_factor)
    a = cfg.preprocess.actors
    return ProducerPool(args, plan_blocks(cfg, idx, epochs), a.min_size, a.num_cpus, dict(a.resources or {}))


class StreamHub:
    """The actor's body (see the module docstring); every method is safe from any thread."""

    def __init__(self, spec: HubSpec):
        self.spec = spec
        self.window = StreamWindow(spec.window_rows)
        self.cond = threading.Condition(threading.RLock())
        self.consumers: dict[str, ConsumerRecord] = {}
        self.last_seen: dict[str, float] = {}
        self.waiting: set[str] = set()  # trials inside take() waiting for a block: not stalled
        self.evicted: dict[str, str] = {}
        self.done: set[str] = set()
        self.stopping = False
        self.error: str | None = None
        self.thread: threading.Thread | None = None
        self.reads: ReadCounter | None = None
        self.blocks = 0
        self.producer_wait_s = 0.0  # time the producer waited for room (backpressure) or a consumer
        self.unused_rows = 0  # rows the actors had read ahead when the producer stopped (never produced)
        self.calls_cut = 0  # actor calls still running then (stopped part-way)
        self.started_at: float | None = None
        self.source_lock = threading.Lock()
        self.source: tuple[PipelineConfig, SourceIndex] | None = None
        self.held_lock = threading.Lock()
        self.held: dict[int | None, tuple[HeldOutRecord, Any, Exception | None]] = {}

    # --- the consumers' calls ---
    def start(self) -> None:
        """Start the producer if it has not started (a trial of the group is starting: the
        first window is made meanwhile)."""
        with self.cond:
            if self.thread is None and not self.stopping:
                self.started_at = time.time()
                self.thread = threading.Thread(target=self._produce, name=f"echoray-share-{self.spec.group}",
                                               daemon=True)
                self.thread.start()

    def attach(self, trial: str) -> int:
        """Attach `trial` where the stream stands; its start row."""
        with self.cond:
            self._check(trial)
            self.evicted.pop(trial, None)
            self.done.discard(trial)
            start = self.window.attach(trial)
            self.consumers[trial] = ConsumerRecord(trial, start, attached_at=time.time())
            self.last_seen[trial] = time.monotonic()
            self.start()  # the condition's lock is re-entrant
            self.cond.notify_all()
            return start

    def take(self, trial: str, wait_s: float) -> tuple[str, list, int]:
        """("block", [ObjectRef], rows), ("end", [], 0) or ("wait", [], 0) after wait_s."""
        deadline = time.monotonic() + wait_s
        with self.cond:
            while True:
                self._check(trial)
                if trial not in self.window.positions:
                    raise RuntimeError(self.evicted.get(trial, f"trial {trial} is not attached to "
                                                               f"shared stream {self.spec.group}"))
                self.last_seen[trial] = time.monotonic()
                block = self.window.advance(trial)
                if block is not None:
                    self.consumers[trial].rows_taken += block.rows
                    self.cond.notify_all()  # the producer may have room now
                    return "block", [block.item], block.rows
                if self.window.finished:
                    return "end", [], 0
                left = deadline - time.monotonic()
                if left <= 0:
                    return "wait", [], 0
                self.waiting.add(trial)
                try:
                    self.cond.wait(left)
                finally:
                    self.waiting.discard(trial)

    def detach(self, trial: str, rows_used: int, reason: str) -> None:
        """`trial` stops reading: it holds nothing from now on."""
        with self.cond:
            self.window.detach(trial)
            rec = self.consumers.get(trial)
            if rec is not None and rec.ended is None:
                rec.rows_used, rec.ended, rec.detached_at = rows_used, reason, time.time()
            self._finished(trial)

    def skip(self, trial: str, reason: str) -> None:
        """`trial` will not attach (its earlier attempt finished, or it trains elsewhere)."""
        with self.cond:
            self._finished(trial)

    def held_out(self, out_size: int | None) -> list | None:
        """The group's held-out split, centre-cropped to `out_size`, decoded once here
        (data/held_out.py HeldOut): [its ObjectRef], or None where the split is over
        the cache bound (each trial then reads its own, in chunks, at every evaluation).
        The first caller decodes it while the others wait; the decode's error (too many
        undecodable files) is raised to every caller."""
        with self.held_lock:
            if out_size not in self.held:
                self.held[out_size] = self._decode_held_out(out_size)
            rec, item, error = self.held[out_size]
            rec.asks += 1
        if error is not None:
            raise error
        return None if item is None else [item]

    def state(self) -> dict[str, Any]:
        with self.cond:
            return {"group": self.spec.group, "window": self.window.state(), "error": self.error,
                    "producer_running": self.thread is not None and self.thread.is_alive(),
                    "blocks": self.blocks, "done": sorted(self.done), "evicted": dict(self.evicted)}

    def report(self) -> dict[str, Any]:
        """The group's record for the search (share_streams.json): the window, what was
        read per plan epoch, and every trial's attachment."""
        with self.cond:
            return {**{k: v for k, v in asdict(self.spec).items() if k != "config"},
                    "window": self.window.state(), "produced_rows": self.window.head, "produced_blocks": self.blocks,
                    "read_unused_rows": self.unused_rows, "calls_cut": self.calls_cut,
                    "producer_wait_s": round(self.producer_wait_s, 3), "started_at": self.started_at,
                    "reads_per_epoch": {str(e): s for e, s in sorted((self.reads.summary() if self.reads else {}).items())},
                    "consumers": [asdict(c) for c in self.consumers.values()], "evicted": dict(self.evicted),
                    # list(): one C call, so a held-out call adding a size meanwhile cannot
                    # change the dict under it (held_lock is held through a whole decode)
                    "held_out": [asdict(rec) for rec, _, _ in list(self.held.values())], "error": self.error}

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the producer (the search is over) and wait for its stream to shut down."""
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        if self.thread is not None:
            self.thread.join(timeout_s)

    # --- inside ---
    def _check(self, trial: str) -> None:
        if self.error is not None:
            raise RuntimeError(f"the shared preprocessing stream of group {self.spec.group} "
                               f"(trials {', '.join(self.spec.trials)}) failed: {self.error}")
        if trial not in self.spec.trials:
            raise ValueError(f"trial {trial} is not in shared stream group {self.spec.group}")

    def _finished(self, trial: str) -> None:
        self.done.add(trial)
        if set(self.spec.trials) <= self.done:
            self.stopping = True  # nobody will read any more: free the preprocessing actors
        self.cond.notify_all()

    def _room(self) -> bool:
        """Wait until the producer may append (or must stop); False: stop."""
        with self.cond:
            t0 = time.monotonic()
            while not self.stopping and not self.window.can_produce():
                self._evict_stalled()
                self.cond.wait(1.0)
            self.producer_wait_s += time.monotonic() - t0
            return not self.stopping

    def _evict_stalled(self) -> None:
        """Detach the slowest trial when the window is full and it has taken nothing for
        stall_timeout_s: the others go on, its next take says why."""
        slow = self.window.slowest()
        if slow is None or slow in self.waiting or self.window.held_rows() < self.window.bound:
            return  # a trial waiting inside take() was woken for a block and has not run yet
        idle = time.monotonic() - self.last_seen.get(slow, time.monotonic())
        if idle >= self.spec.stall_timeout_s:
            self.evicted[slow] = (f"trial {slow} took no block of shared stream {self.spec.group} for {idle:.0f} s "
                                  f"while it held the full window ({self.window.bound} rows) back: detached")
            self.window.detach(slow)

    def _source(self) -> tuple[PipelineConfig, SourceIndex]:
        """The group's config, placed as each trial's run places it, and its source's index
        (made once, by the producer or the first held-out call)."""
        from echoray.runtime.placement import fit_placement

        with self.source_lock:
            if self.source is None:
                cfg, _ = fit_placement(PipelineConfig.model_validate(self.spec.config))
                self.source = cfg, index_source(cfg.source)
            return self.source

    def _open(self):
        """The group's producer pool, made in the producer thread (tune/share_producer.py)."""
        cfg, idx = self._source()
        self.reads = ReadCounter(int(idx.train_ids.max(initial=0)) + 1)
        return producer_pool(cfg, idx, self.spec.epochs)

    def _decode_held_out(self, out_size: int | None) -> tuple[HeldOutRecord, Any, Exception | None]:
        """(its record, the ObjectRef of the decoded split or None, the decode's error)."""
        rec, t0 = HeldOutRecord(out_size), time.perf_counter()
        try:
            decoded = HeldOutReader(self._source()[1], 0, 1, out_size).decode()
        except Exception as exc:  # noqa: BLE001 - every trial that asks gets it, as its own decode would raise
            rec.error = f"{type(exc).__name__}: {exc}"
            return rec, None, exc
        finally:
            rec.decode_s = round(time.perf_counter() - t0, 3)
        rec.rows = decoded.rows if decoded is not None else 0
        return rec, None if decoded is None else self._put(decoded), None

    def _put(self, value: Any) -> Any:
        """Into the object store, owned by the hub (it lives as long as the search)."""
        return ray.put(value)

    def _produce(self) -> None:
        pool = None
        try:
            pool = self._open()
            while self._room():
                got = pool.next()
                if got is None:
                    break
                produced, item = got
                if not produced.rows:
                    continue
                self.reads.add(produced.epoch, produced.sample_id)
                with self.cond:
                    self.window.append(produced.rows, item, produced.nbytes)
                    self.blocks += 1
                    self.cond.notify_all()
        except Exception as exc:  # noqa: BLE001 - every consumer's next take raises it
            with self.cond:
                self.error = f"{type(exc).__name__}: {exc}"
        finally:
            unused = pool.close() if pool is not None else (0, 0)
            with self.cond:
                self.unused_rows, self.calls_cut = unused
                self.window.finish()
                self.cond.notify_all()


def start_hub(spec: HubSpec):
    """The group's StreamHub actor: no CPU of its own, a thread per waiting call."""
    return ray.remote(StreamHub).options(
        num_cpus=0, max_concurrency=2 * len(spec.trials) + 8, name=None).remote(spec)
