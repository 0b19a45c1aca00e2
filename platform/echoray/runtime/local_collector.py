"""A run's collector in the run's own process, where no other process reports to it.

A run trained in process on a search's shared stream (tune/share_consumer.py) has no
preprocessing actors of its own: its only reporters are its worker loop and its driver,
both in the trial's process. Its RunCollector (runtime/collector.py) then needs no
process of its own, and `open_collector` makes it a `LocalCollector` there instead. Every
other run keeps the actor, which its preprocessing actors and Ray Train's workers call.

`LocalCollector` answers the actor handle's calls: `handle.method.remote(*args)` runs the
method at once, under one lock (an actor runs one call at a time), and returns an
ObjectRef of the result (`ray.put`), so the callers that `ray.get` or `ray.wait` an
actor's reply work unchanged; the worker loop calls it directly (train/worker_link.py
`link_to`). An error in a method is raised to its caller at once, where the actor would
have raised it only from `ray.get`. `end_collector` ends either kind: once a LocalCollector is ended,
every call raises `CollectorEnded`, as every call to a killed actor fails, so a loop
still running ends at its next heartbeat.

Measured (benchmarks/shared_stream.py, width 8, channels_last, commit 1c04931): a shared
search's 8 collector processes used 12.4 CPU-s of its 198 busy CPU-seconds, each a new
Ray worker process importing Ray and echoray's runtime for a run's bookkeeping.
"""

from __future__ import annotations

import threading
from typing import Any

import ray

from echoray.runtime.collector import RunCollector


class CollectorEnded(RuntimeError):
    """A call to a run's collector after the run ended (end_collector)."""


class _Method:
    def __init__(self, owner: LocalCollector, name: str):
        self.owner, self.name = owner, name

    def remote(self, *args, **kwargs) -> ray.ObjectRef:
        return ray.put(self.owner.call(self.name, *args, **kwargs))

    def __call__(self, *args, **kwargs) -> Any:  # the worker loop's link calls it directly (link_to)
        return self.owner.call(self.name, *args, **kwargs)


class LocalCollector:
    """RunCollector's state in this process, behind the actor handle's interface."""

    def __init__(self, *args, **kwargs):
        self._state = RunCollector.__ray_actor_class__(*args, **kwargs)
        self._lock = threading.Lock()
        self._ended: str | None = None

    def call(self, name: str, *args, **kwargs) -> Any:
        with self._lock:
            if self._ended is not None:
                raise CollectorEnded(f"the run's collector has ended ({self._ended}); {name} was called after it")
            return getattr(self._state, name)(*args, **kwargs)

    def end(self, reason: str) -> None:
        with self._lock:
            self._ended = reason

    def __reduce__(self):
        raise TypeError("a LocalCollector lives in its run's process and cannot be sent to another "
                        "(a run whose actors report to its collector needs the RunCollector actor: open_collector)")

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("_") or not callable(getattr(RunCollector.__ray_actor_class__, name, None)):
            raise AttributeError(f"RunCollector has no method {name!r}")
        return _Method(self, name)


def open_collector(local: bool, *args, **kwargs):
    """A RunCollector actor, or (`local`: nothing outside this process reports to the
    run) a LocalCollector with the same arguments."""
    return LocalCollector(*args, **kwargs) if local else RunCollector.remote(*args, **kwargs)


def end_collector(collector) -> None:
    """End a run's collector of either kind: the actor is killed, a LocalCollector refuses
    every later call."""
    if isinstance(collector, LocalCollector):
        collector.end("the run ended")
    else:
        ray.kill(collector)
