"""How the worker loop talks to the run's collector and to the other ranks, behind two
small interfaces, so the loop runs with or without Ray (tests, benchmarks).

Nothing in the per-step path waits on the driver: heartbeats go out fire-and-forget and
the previous heartbeat's reply (is the run aborted?) is looked at with
ray.wait(timeout=0); the live echo factor (`echo.factor: auto` with batch echo) is
fetched the same way, and a beat or a fetch whose reply has not come yet is skipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from echoray.epochs import evaluation_point
from echoray.records import Heartbeat


class CollectorLink:
    """The RunCollector actor (runtime/collector.py) through its Ray handle."""

    def __init__(self, handle):
        import ray

        self._ray, self.handle = ray, handle
        self._beat = None  # the previous heartbeat's reply, not yet looked at
        self._factor_ref = None
        self.factor: float | None = None  # the latest live echo factor received

    def send(self, method: str, *args, **kwargs) -> None:
        getattr(self.handle, method).remote(*args, **kwargs)

    def ask(self, method: str, *args, **kwargs):
        return self._ray.get(getattr(self.handle, method).remote(*args, **kwargs))

    def _ready(self, ref) -> bool:
        return bool(self._ray.wait([ref], timeout=0)[0])

    def beat(self, beat: Heartbeat) -> bool:
        """Send a heartbeat; True when an earlier reply said the run was aborted."""
        aborted = False
        if self._beat is not None:
            if not self._ready(self._beat):
                return False  # the collector is busy: skip a beat rather than queue them
            aborted = bool(self._ray.get(self._beat))
        self._beat = self.handle.heartbeat.remote(beat)
        return aborted

    def live_factor(self) -> float | None:
        """The echo factor of the latest finished request; starts the next one (the first
        call waits once, at start-up, so a resumed run starts from its saved factor)."""
        if self.factor is None:
            self.factor = float(self.ask("echo_factor"))
        if self._factor_ref is not None and self._ready(self._factor_ref):
            self.factor = float(self._ray.get(self._factor_ref))
            self._factor_ref = None
        if self._factor_ref is None:
            self._factor_ref = self.handle.echo_factor.remote()
        return self.factor


class LocalLink:
    """The same calls on a plain in-process object (tests, benchmarks)."""

    def __init__(self, target):
        self.target = target

    def send(self, method: str, *args, **kwargs) -> None:
        getattr(self.target, method)(*args, **kwargs)

    def ask(self, method: str, *args, **kwargs):
        return getattr(self.target, method)(*args, **kwargs)

    def beat(self, beat: Heartbeat) -> bool:
        return bool(self.target.heartbeat(beat))

    def live_factor(self) -> float | None:
        return float(self.target.echo_factor())


@dataclass
class Collectives:
    """The collectives the loop uses; every rank calls them at the same points."""

    all_reduce_ints: Callable[[list[int]], list[int]]
    broadcast_float: Callable[[float], float]  # rank 0's value on every rank
    gather: Callable[[object], list]  # every rank's object, in rank order

    @classmethod
    def single(cls) -> Collectives:
        return cls(list, float, lambda obj: [obj])

    @classmethod
    def torch_distributed(cls) -> Collectives:
        from echoray.train.evaluate import all_reduce_ints

        return cls(all_reduce_ints, _broadcast_float, _gather)


def _broadcast_float(value: float) -> float:
    import torch
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return value
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.broadcast(t, src=0)
    return float(t.item())


def _gather(obj: object) -> list:
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


class FreshClock:
    """When an evaluation is due, in every run: the first step at which the global fresh
    count reaches the next evaluation point (echoray/epochs.py: evaluation i at
    ceil(i * n_train / per_epoch) fresh examples, per_epoch = train.evals_per_epoch), so
    an epoch is a pass of fresh data whatever the echo factor. Instead of an all-reduce
    every step, the count is summed only at steps where it can have got there: one step
    adds at most `max_fresh_per_step` (readers x batch) fresh examples, so after a sum of
    F short of the target T no step before ceil((T - F) / max) more can reach it. The
    same evaluations fall at the same steps as with a sum every step; the checks get
    denser near the point (about log2 of the steps between evaluations of them).
    `last` (train.max_epochs x per_epoch): the run's last evaluation is never due here:
    the stream's end scores it (train/loop.py finish), after the echo copies that follow
    the last fresh example, so a run makes max_epochs x per_epoch evaluations at any
    factor."""

    def __init__(self, n_train: int, max_fresh_per_step: int, all_reduce_ints, per_epoch: int = 1,
                 last: int | None = None):
        self.n_train, self.max_per_step, self.all_reduce = n_train, max_fresh_per_step, all_reduce_ints
        self.per_epoch, self.last = per_epoch, last
        self.next_check = 0
        self.checks = 0

    def due(self, steps: int, evals: int, local_fresh: int) -> bool:
        if steps < self.next_check or (self.last is not None and evals + 1 >= self.last):
            return False
        self.checks += 1
        (total,) = self.all_reduce([local_fresh])
        target = evaluation_point(evals + 1, self.n_train, self.per_epoch)
        if total >= target:
            self.next_check = steps + 1
            return True
        self.next_check = steps + max(1, math.ceil((target - total) / self.max_per_step))
        return False
