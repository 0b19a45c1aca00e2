"""One group's shared preprocessing stream: a Ray actor that produces it once and fans it out.

`StreamHub` runs in a threaded actor (no CPU of its own: its preprocessing actors ask
for theirs, as a trial's would). A producer thread iterates the group's Ray Data
stream, read plan -> the preprocessing actor pool (data/stages.py Preprocess) with no
echo, and puts every block in the object store; the blocks' ObjectRefs wait in a
StreamWindow (tune/stream_window.py) until every attached trial has taken them. The
producer starts when the group's first trial starts (`start`: the first window is made
while the trial sets up), waits while the window is full (backpressure) or when every
trial that attached has left, and stops for good once every trial of the group has
detached or said it will not attach (a finished attempt of a resumed search). Trials attach, take blocks in order and detach
(tune/share_consumer.py).

Stalls fail loudly: a trial that takes nothing for train.stall_timeout_s while it holds
the full window back is detached (its next take says why) so the others go on; a trial
that waits that long for a block names the hub's state (tune/share_consumer.py).

A block is put into the object store by the hub (one copy of the actor's output: a
few ms for 64 JPEG crops, against ~0.3 s to decode them) rather than handing on Ray
Data's internal block refs (a DeveloperAPI whose bundles may be slices of blocks).
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import pyarrow as pa
import ray
import ray.data
from ray.data import ActorPoolStrategy, ExecutionResources

from echoray.config import PipelineConfig
from echoray.data.op_shapes import output_size
from echoray.data.plan import plan_chunks, read_plan
from echoray.data.preprocess_args import preprocess_args
from echoray.data.sources import SourceIndex, index_source
from echoray.data.stages import Preprocess
from echoray.echo_plan import EchoPlan
from echoray.tune.read_counts import ReadCounter
from echoray.tune.stream_window import StreamWindow

# from_blocks computes each block's metadata in this process: 4,096 small Arrow tables
# is a fraction of a second, millions (ImageNet's 40,000 chunks x hundreds of epochs,
# one call each) would not be.
MAX_PLAN_BLOCKS = 4096

# The object-store bytes the hub's Ray Data stream may hold ahead of the producer thread:
# twice the window's bound in rows, at least AHEAD_FLOOR_BYTES. Without a limit Ray Data
# runs the pool as far ahead as its share of the object store allows, whatever the
# window: a hub whose trials took 2,552 rows had its actors decode 26,576 (and go on
# decoding while nobody took anything); with a 20 MB limit they decoded 3,320 and
# stopped (64-pixel JPEG crops, 12 KB a row). A search of 8 trials spent as much
# preprocessing CPU with one shared stream as with eight of their own.
AHEAD_FLOOR_BYTES = 16 * 2**20


def row_bytes(cfg: PipelineConfig, idx: SourceIndex) -> int:
    """An upper estimate of one produced row's bytes: its image after the CPU ops (uint8),
    or its packed sequence (int64 tokens), plus its id columns."""
    if idx.kind == "text":
        return 8 * (int(idx.details["seq_len"]) + 1) + 64
    side = idx.image_size or 0
    aug = cfg.preprocess.augment
    if aug.on == "cpu" and aug.ops and side:
        side = output_size(side, aug.ops)
    return side * side * idx.channels + 64


def ahead_bytes(cfg: PipelineConfig, idx: SourceIndex, window_rows: int) -> int:
    """The object-store limit of the hub's stream (see AHEAD_FLOOR_BYTES)."""
    return max(AHEAD_FLOOR_BYTES, 2 * window_rows * row_bytes(cfg, idx))


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


def producer_dataset(cfg: PipelineConfig, idx: SourceIndex, epochs: int, window_rows: int) -> ray.data.Dataset:
    """The group's stream: plan epochs 0..epochs-1, the preprocessing actor without echo
    (EchoPlan shared_stream: the trials echo), one actor call per plan block so a block
    enters the window as soon as its call ends (at most MAX_PLAN_BLOCKS plan blocks:
    a longer plan has blocks of several calls); Ray Data holds at most ahead_bytes of
    output beyond what the producer has taken, so the window's backpressure reaches the
    actors."""
    n_chunks = plan_chunks(idx, cfg.source.chunk_size)
    per_call = max(1, cfg.preprocess.batch_size // cfg.source.chunk_size)
    block_chunks = max(per_call, -(-n_chunks * epochs // MAX_PLAN_BLOCKS))
    plan = EchoPlan.from_config(cfg, shared_stream=True)
    args = replace(preprocess_args(cfg, idx), echo_before_augment=plan.in_actor_before_augment,
                   echo_after_augment=plan.in_actor_after_augment, echo_factor=plan.actor_factor)
    a = cfg.preprocess.actors
    ds = ray.data.from_blocks([pa.table(b) for b in read_plan(cfg.seed, epochs, n_chunks, block_chunks=block_chunks)])
    ds = ds.map_batches(
        Preprocess, fn_constructor_args=(args,), batch_size=per_call,
        compute=ActorPoolStrategy(min_size=a.min_size, max_size=a.max_size), num_cpus=a.num_cpus,
        udf_modifying_row_count=True, **({"resources": dict(a.resources)} if a.resources else {}))
    ds.context.execution_options.preserve_order = cfg.preprocess.deterministic
    ds.context.execution_options.resource_limits = ExecutionResources(
        object_store_memory=ahead_bytes(cfg, idx, window_rows))
    return ds


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
        self.started_at: float | None = None

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
                    "producer_wait_s": round(self.producer_wait_s, 3), "started_at": self.started_at,
                    "reads_per_epoch": {str(e): s for e, s in sorted((self.reads.summary() if self.reads else {}).items())},
                    "consumers": [asdict(c) for c in self.consumers.values()], "evicted": dict(self.evicted),
                    "error": self.error}

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

    def _batches(self):
        """The group's preprocessed blocks, as numpy batches, from its Ray Data stream."""
        from echoray.runtime.placement import fit_placement
        from echoray.runtime.session import quiet_data

        quiet_data()
        cfg, _ = fit_placement(PipelineConfig.model_validate(self.spec.config))  # as each trial's run does
        idx = index_source(cfg.source)
        self.reads = ReadCounter(int(idx.train_ids.max(initial=0)) + 1)
        return iter(producer_dataset(cfg, idx, self.spec.epochs, self.spec.window_rows).iter_batches(
            batch_size=None, batch_format="numpy", prefetch_batches=1))

    def _put(self, batch: dict):
        return ray.put(batch)

    def _produce(self) -> None:
        it = None
        try:
            it = self._batches()
            while self._room():
                batch = next(it, None)
                if batch is None:
                    break
                n = len(batch["sample_id"])
                if not n:
                    continue
                self.reads.add(batch["epoch"], batch["sample_id"])
                ref = self._put(batch)
                with self.cond:
                    self.window.append(n, ref, sum(v.nbytes for v in batch.values()))
                    self.blocks += 1
                    self.cond.notify_all()
        except Exception as exc:  # noqa: BLE001 - every consumer's next take raises it
            with self.cond:
                self.error = f"{type(exc).__name__}: {exc}"
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()
            with self.cond:
                self.window.finish()
                self.cond.notify_all()


def start_hub(spec: HubSpec):
    """The group's StreamHub actor: no CPU of its own, a thread per waiting call."""
    return ray.remote(StreamHub).options(
        num_cpus=0, max_concurrency=2 * len(spec.trials) + 8, name=None).remote(spec)
