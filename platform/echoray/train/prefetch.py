"""Input work made ahead of the train step, on a thread (issue 60).

`Prefetch(items, prepare, depth)` yields `(item, prepare(item))` in the order of `items`,
exactly what the serial loop `for item in items: yield item, prepare(item)` yields. With
depth >= 1 a daemon thread pulls the items and prepares them at most `depth` items ahead of
the one the consumer holds, so that pulling the next batch (packing, consumption-side echo)
and preparing it (formatting, normalising, host-to-device copies) overlap the step instead
of running on its critical path; depth 0 is the serial loop in the caller's thread.

Errors raised by `items` or `prepare` are raised in the consumer at the item where they
happened. `close()` (or leaving the `with` block) stops the thread after the item it is
on; a pull that blocks (a stream's next batch) is left to end on its own (a daemon thread).
The thread runs inside `context()` (a CUDA device context: a new thread starts on device 0).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

_END, _ERROR, _ITEM = 0, 1, 2
_NONE = object()  # the end of `items`


class Prefetch:
    def __init__(self, items: Iterable[Any], prepare: Callable[[Any], Any], depth: int = 1,
                 context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext):
        if depth < 0:
            raise ValueError(f"prefetch depth {depth}: must be >= 0")
        self.items, self.prepare, self.depth, self.context = items, prepare, depth, context
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._room = threading.Semaphore(depth)  # items the thread may prepare ahead
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        if self.depth == 0:
            for item in self.items:
                yield item, self.prepare(item)
            return
        self._thread = threading.Thread(target=self._run, name="echoray-prefetch", daemon=True)
        self._thread.start()
        while True:
            kind, value = self._queue.get()
            if kind == _END:
                return
            if kind == _ERROR:
                raise value
            self._room.release()  # the consumer holds this item: the thread prepares the next
            yield value

    def _run(self) -> None:
        try:
            with self.context():
                it = iter(self.items)
                while True:
                    self._room.acquire()  # pull only while fewer than `depth` items are ahead
                    if self._stop.is_set():
                        return
                    item = next(it, _NONE)
                    if item is _NONE:
                        break
                    self._queue.put((_ITEM, (item, self.prepare(item))))
        except BaseException as exc:  # noqa: BLE001 - raised again in the consumer
            self._queue.put((_ERROR, exc))
            return
        self._queue.put((_END, None))

    def close(self) -> None:
        """Stop the thread after its current item (the consumer takes no more)."""
        self._stop.set()
        self._room.release()
