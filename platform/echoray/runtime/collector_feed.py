"""What a preprocessing actor sends to its run's collector (runtime/collector.py), kept off
the actor's data path: no call waits on the collector.

One exchange carries everything: `Batch` sums the rows and busy seconds of the actor's
calls per stage, the rows it read and the undecodable files it found first; `Refreshed`
sends it (RunCollector.reports) at most every REFRESH_S, and the reply (the live echo
factor, whether training has started, the run's fatal error) is looked at, never waited
for, at a later call. So an actor's load on the collector is at most one call per
REFRESH_S whatever its block rate (docs/benchmarks/control-plane.md). Sent at once,
outside the interval: a batch with reads before the first training step (the reads a run
had before it began training are counted as they happen), and a batch with newly found
bad files (the run's budget is decided without delay).

Bad files: `BadExamples` (runtime/bad_examples.py) over this actor's own finds decides
locally when they alone pass source.max_bad_fraction (then the split's count does too);
the collector decides over all actors and answers with the run's fatal error, which the
actor raises at its next call. Each bad id goes to the collector once per actor.

The last batch: `CollectorFeed.close` sends it and waits up to CLOSE_WAIT_S (the actor's
end: Ray Data calls the UDF's `__del__` when it releases an actor gracefully). An actor
killed outright loses at most REFRESH_S of its reports: the rates are ratios over the
reports that came, and the summary's source reads then miss that window.

Pure given `send` (method name and arguments -> a concurrent.futures.Future of the reply)
and a clock: CollectorFeed.to(handle) builds `send` from the actor's handle.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from echoray.runtime.bad_examples import BadExamples

REFRESH_S = 0.5  # the most often an actor calls the collector (auto's window: runtime/auto_echo.py)
CLOSE_WAIT_S = 2.0  # the actor's end waits this long at most for its last batch to land
FATAL_WAIT_S = 5.0  # a failing call waits this long at most for the collector to hold its error

Send = Callable[..., Future]


class Refreshed:
    """The latest reply of a request made in the background: `poll` starts one when
    `every_s` have passed since the last and none is in flight (or at once, `urgent`),
    and returns the newest reply that has come; it never waits. A request that failed
    leaves the previous reply."""

    def __init__(self, request: Callable[[], Future], reply: Any, every_s: float = REFRESH_S,
                 clock: Callable[[], float] = time.monotonic):
        self.request, self.reply, self.every_s, self.clock = request, reply, every_s, clock
        self.pending: Future | None = None
        self.asked_at = -math.inf

    def take_done(self) -> Any:
        """The newest reply, taking the one in flight if it has come."""
        if self.pending is not None and self.pending.done():
            if self.pending.exception() is None:
                self.reply = self.pending.result()
            self.pending = None
        return self.reply

    def poll(self, urgent: bool = False) -> Any:
        self.take_done()
        now = self.clock()
        if self.pending is None and (urgent or now - self.asked_at >= self.every_s):
            self.pending, self.asked_at = self.request(), now
        elif urgent:  # sent at once; the reply awaited stays the oldest in flight: replacing it
            self.request()  # let no reply land under load, so every block was sent (control_plane.json)
            self.asked_at = now
        return self.reply


@dataclass
class Batch:
    """An actor's reports since its last send: stage -> [rows, busy seconds], rows read,
    when the first of those reads began (wall clock), bad files (id, file, reason)."""

    stages: dict[str, list[float]] = field(default_factory=dict)
    reads: int = 0
    read_began: float | None = None
    bad: list[tuple[int, str, str]] = field(default_factory=list)

    def add_stage(self, name: str, rows: int, busy_s: float) -> None:
        t = self.stages.setdefault(name, [0, 0.0])
        t[0] += rows
        t[1] += busy_s

    def add_reads(self, rows: int, began: float) -> None:
        self.reads += rows
        if rows and self.read_began is None:
            self.read_began = began

    def empty(self) -> bool:
        return not (self.stages or self.reads or self.bad)

    def to_report(self) -> dict[str, Any]:
        """The form RunCollector.reports takes."""
        return {"stages": {k: tuple(v) for k, v in self.stages.items()}, "reads": self.reads,
                "read_began": self.read_began, "bad": list(self.bad)}


class CollectorFeed:
    """One preprocessing actor's link to the run's collector (see the module docstring).
    `send` None: no collector (the budget is this actor's alone)."""

    def __init__(self, send: Send | None, actor: str, factor: float, n_train: int, max_bad_fraction: float,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time):
        self.send, self.actor, self.wall = send, actor, wall
        self.batch = Batch()
        self.mine = BadExamples(n_train, max_bad_fraction)  # this actor's finds
        self.link = Refreshed(self._flush, {"factor": factor, "started": False, "fatal": None}, clock=clock)

    @classmethod
    def to(cls, handle, actor: str, auto: bool, factor: float, n_train: int, max_bad_fraction: float,
           **clocks) -> CollectorFeed:
        """A feed to the collector actor `handle` (None: none). `auto`: the first factor is
        the collector's, asked once here (a resumed run starts from its saved one), not at a call."""
        if handle is None:
            return cls(None, actor, factor, n_train, max_bad_fraction, **clocks)

        def send(method: str, *args) -> Future:
            return getattr(handle, method).remote(*args).future()

        if auto:
            factor = float(send("echo_factor").result())
        return cls(send, actor, factor, n_train, max_bad_fraction, **clocks)

    def _flush(self) -> Future:
        report, self.batch = self.batch.to_report(), Batch()
        return self.send("reports", self.actor, report)

    def _poll(self, urgent: bool = False) -> dict[str, Any]:
        if self.send is None:
            return self.link.reply
        started = self.link.take_done()["started"]
        return self.link.poll(urgent=urgent or (not started and self.batch.reads > 0))

    def factor(self) -> float:
        """The live echo factor: the newest the collector answered."""
        return float(self._poll()["factor"])

    def stage(self, name: str, rows: int, busy_s: float, reads: int = 0) -> None:
        """One call's stage: rows, busy seconds and the rows it read from the source."""
        self.batch.add_stage(name, rows, busy_s)
        self.reads(reads, busy_s)

    def reads(self, rows: int, busy_s: float = 0.0) -> None:
        """Rows read from the source by a stage, begun busy_s ago."""
        self.batch.add_reads(rows, self.wall() - busy_s)
        self._poll()

    def bad(self, items: list[tuple[int, str, str]]) -> str | None:
        """Undecodable files a call found: the message to fail with when this actor's finds
        alone pass the budget, else None (the collector gets the new ones now)."""
        new = [it for it in items if int(it[0]) not in self.mine.bad]
        verdict = self.mine.add(items)
        if verdict["over"]:
            return verdict["message"]
        if new:
            self.batch.bad.extend(new)
            self._poll(urgent=True)
        return None

    def failure(self) -> str | None:
        """The run's bad-data error, once a reply has brought it (raised at the next call)."""
        fatal = self.link.take_done()["fatal"]
        return fatal["message"] if fatal and fatal["kind"] == "data" else None

    def fatal(self, message: str) -> None:
        """A call fails on bad data: the collector holds the error before the call raises it
        (the driver then stops the run instead of retrying). Waits at most FATAL_WAIT_S, once;
        a collector gone or slower than that leaves the call's own error to be raised."""
        if self.send is None:
            return
        try:
            self.send("fatal", message, "data").result(timeout=FATAL_WAIT_S)
        except Exception:  # noqa: BLE001 - the caller raises the bad-data error either way
            pass

    def close(self) -> None:
        """The actor's end: send what is left and wait at most CLOSE_WAIT_S for it to land;
        a collector already gone (the run ended) is no error."""
        if self.send is None or self.batch.empty():
            return
        try:
            self._flush().result(timeout=CLOSE_WAIT_S)
        except Exception:  # noqa: BLE001 - the run's collector may be gone; nothing is left to tell
            pass
