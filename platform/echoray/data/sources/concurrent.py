"""Many reads in flight per preprocessing actor, results in request order.

An object store answers each GET after 20-50 ms whatever its bandwidth, so one
read at a time caps an actor at a few dozen files/s. A thread pool keeps
`SourceIndex.read_concurrency` requests outstanding: pyarrow's filesystems and
simplejpeg release the GIL while they wait or decode, so the threads overlap
I/O with decoding too. `map` returns results in the order of the inputs, which
keeps the rows of a read, and so the audit, identical to a sequential read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


class ConcurrentReads:
    def __init__(self, concurrency: int):
        self.concurrency = max(1, int(concurrency))
        self._pool: ThreadPoolExecutor | None = None

    def map(self, fn: Callable[..., Any], *iterables: Iterable) -> list:
        if self.concurrency == 1:
            return list(map(fn, *iterables))
        if self._pool is None:  # made on first use: a reader may be pickled before that
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="echoray-read")
        return list(self._pool.map(fn, *iterables))

    def __getstate__(self) -> dict:
        return {"concurrency": self.concurrency, "_pool": None}
