"""Ranks of a worker group run as threads of one test process (rank logic tested for every
rank in one process): the collectives they would reach through torch.distributed."""

from __future__ import annotations

import threading

from echoray.worker.link import Collectives


class ThreadComm:
    """Collectives between ranks that run as threads of this process."""

    def __init__(self, world):
        self.barrier, self.slots = threading.Barrier(world), [None] * world

    def for_rank(self, r):
        def gather(obj):
            self.slots[r] = obj
            self.barrier.wait()
            out = list(self.slots)
            self.barrier.wait()
            return out
        return Collectives(lambda v: [sum(x) for x in zip(*gather(list(v)), strict=True)],
                           lambda x: gather(x)[0], gather)
