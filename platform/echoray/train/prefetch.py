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
`held()` gives the consumer the items made ahead of it, with the thread idle, so that a
checkpoint can save what was pulled from the stream but not trained.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
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
        self._ready: deque = deque()  # (kind, value) made by the thread, not handed out yet
        self._cond = threading.Condition()
        self._ahead = 0  # items pulled or being pulled and not handed out
        self._busy = False  # the thread is pulling or preparing an item
        self._stop = False
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
            with self._cond:
                self._cond.wait_for(lambda: self._ready)
                kind, value = self._ready.popleft()
                if kind == _ITEM:
                    self._ahead -= 1
                self._cond.notify_all()  # the consumer holds this item: the thread may pull the next
            if kind == _END:
                return
            if kind == _ERROR:
                raise value
            yield value

    def held(self) -> list[tuple[Any, Any]]:
        """The items made ahead and not handed out, in order, once the thread has finished
        the one it is on (it pulls no more until the consumer takes one): what a checkpoint
        must count as not consumed yet. Called by the consumer only."""
        with self._cond:
            self._cond.wait_for(lambda: not self._busy)
            return [value for kind, value in self._ready if kind == _ITEM]

    def _run(self) -> None:
        try:
            with self.context():
                it = iter(self.items)
                while self._next(it):
                    pass
        except BaseException as exc:  # noqa: BLE001 - raised again in the consumer
            self._put(_ERROR, exc)
            return
        self._put(_END, None)

    def _next(self, it: Iterator[Any]) -> bool:
        """Pull and prepare one item once fewer than `depth` are ahead; False at the end."""
        with self._cond:
            self._cond.wait_for(lambda: self._ahead < self.depth or self._stop)
            if self._stop:
                return False
            self._ahead, self._busy = self._ahead + 1, True
        try:
            item = next(it, _NONE)
            if item is _NONE:
                with self._cond:
                    self._ahead -= 1
                return False
            self._put(_ITEM, (item, self.prepare(item)))
            return True
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def _put(self, kind: int, value: Any) -> None:
        with self._cond:
            self._ready.append((kind, value))
            self._cond.notify_all()

    def close(self) -> None:
        """Stop the thread after its current item (the consumer takes no more)."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
