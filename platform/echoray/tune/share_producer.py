"""The shared stream's producer pool: a fixed set of preprocessing actors that read only
as far ahead as the hub asks.

`ProducerPool` feeds the group's read plan, one plan block per actor call, to
`preprocess.actors.min_size` actors (what the search's concurrency plan reserves for a
producer), at most DEPTH calls in flight per actor, and hands back each call's rows in
plan order: the hub (tune/share_hub.py) takes the next result only while its window has
room, so the actors stop DEPTH calls past the window's bound. A call's rows are a
return value of the actor call, so they are in the object store already, owned by the
hub, and cross no other copy; a small record beside them (rows, bytes, the epochs and
ids read) is all the hub fetches.

Why not the Ray Data stream a trial reads: Ray Data runs an actor pool as far ahead as
its share of the object store allows, whatever the consumer takes (a hub whose trials
took 2,552 rows had its actors decode 26,576, and go on decoding while nobody took
anything). Capping it with `ExecutionResources(object_store_memory=...)` held the actors
to 700 rows ahead, but its executor then spun: the hub's process used 30 CPU-seconds in
38 s (5.6 without the cap), and its autoscaler scaled the pool down and up again, a new
actor process each time (12 in a search of 137 s). Here the actors wait, and the hub's
thread waits on their results.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import ray

# Calls in flight per actor: one running, one queued behind it, so an actor never waits
# for the hub between calls.
DEPTH = 2


@dataclass(frozen=True)
class Produced:
    """What the hub fetches of a call: its row count, bytes, and the (epoch, id) it read."""

    rows: int
    nbytes: int
    epoch: np.ndarray
    sample_id: np.ndarray


class PreprocessActor:
    """A Ray actor around data/stages.py Preprocess: `run` is one call of it on one plan
    block. Preprocess is imported in the actor (torch and the decoders load there)."""

    def __init__(self, args) -> None:
        from echoray.data.stages import Preprocess

        self.preprocess = Preprocess(args)

    def run(self, block: dict[str, np.ndarray]) -> tuple[Produced, dict[str, np.ndarray] | None]:
        rows = next(iter(self.preprocess(block)), None)  # None: the block's files were all skipped
        if rows is None:
            return Produced(0, 0, np.zeros(0, np.int64), np.zeros(0, np.int64)), None
        return Produced(len(rows["sample_id"]), sum(v.nbytes for v in rows.values()),
                        rows["epoch"], rows["sample_id"]), rows


class ProducerPool:
    """The pool (see the module docstring). Not thread-safe: the hub's producer thread
    alone calls it."""

    def __init__(self, args, plan: Iterator[dict[str, np.ndarray]], size: int, num_cpus: float,
                 resources: dict[str, float] | None = None):
        if size < 1:
            raise ValueError(f"a producer pool needs at least one actor, got {size}")
        # As Ray Data's pool (and the hub's earlier Ray Data stream): a dead actor process is
        # restarted and its calls retried; an error a call raises (bad data) is not retried.
        cls = ray.remote(PreprocessActor).options(num_cpus=num_cpus, resources=resources or None,
                                                  max_restarts=-1, max_task_retries=-1)
        # A restart runs the constructor again from its arguments: put once and held here for
        # the pool's life (a source index, e.g. digits' arrays, is too big to travel inline,
        # and Ray frees a creation argument nobody holds: ray-project/ray#53727).
        self.args_ref = ray.put(args)
        self.actors = [cls.remote(self.args_ref) for _ in range(size)]
        self.plan = plan
        self.in_flight = [0] * size
        self.pending: deque[tuple[int, ray.ObjectRef, ray.ObjectRef]] = deque()
        self.plan_done = False

    def fill(self) -> None:
        """Submit plan blocks until every actor has DEPTH calls in flight or the plan ends."""
        while not self.plan_done and min(self.in_flight) < DEPTH:
            block = next(self.plan, None)
            if block is None:
                self.plan_done = True
                return
            i = self.in_flight.index(min(self.in_flight))
            produced, rows = self.actors[i].run.options(num_returns=2).remote(block)
            self.in_flight[i] += 1
            self.pending.append((i, produced, rows))

    def next(self) -> tuple[Produced, ray.ObjectRef | None] | None:
        """The oldest call's record and rows (it waits for them); None once the plan has
        ended and every call is back. A call's exception is raised here."""
        self.fill()
        if not self.pending:
            return None
        i, produced, rows = self.pending.popleft()
        record = ray.get(produced)
        self.in_flight[i] -= 1
        return record, (rows if record.rows else None)

    def close(self) -> tuple[int, int]:
        """Stop the actors (their CPUs are free at once) and drop the calls in flight:
        (rows the finished ones had read, calls still running), for the hub's report."""
        refs = [produced for _, produced, _ in self.pending]
        done, running = ray.wait(refs, num_returns=len(refs), timeout=0) if refs else ([], [])
        unused = 0
        for ref in done:
            try:
                unused += ray.get(ref).rows
            except Exception:  # noqa: BLE001 - a failed call read nothing the stream could use
                pass
        self.pending.clear()
        for actor in self.actors:
            ray.kill(actor)
        return unused, len(running)
