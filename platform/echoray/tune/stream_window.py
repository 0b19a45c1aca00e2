"""The bounded window of one shared stream: which produced blocks are still held, and
whether the producer may add another. Pure: one process, no Ray, no clock.

Positions are rows of the stream, counted from its start. Blocks are appended at the
head; every attached consumer stands at the start of the next block it will take. A
block is held while some attached consumer has not taken it, so the held rows are those
between the slowest consumer and the head. The producer may append while fewer than
`bound_rows` rows are held (so the bound is exceeded by at most one block), and only
while someone is attached or before anyone has: the first window is made while the
first consumers start, but a stream whose readers have all left does not run ahead. A
consumer that detaches stops holding anything at once, except that the blocks the last
attached consumer leaves unread stay held for the next one: one that attaches starts at
the oldest held block (where the slowest consumer stands or the last one left, row 0
before anyone has read), or at the head when nothing is held. Without that, a search
whose running trials all ended between two waves dropped the window they left (up to
the bound: 540 of a smoke search's 2,160 produced rows, twice) and the next trials
started past it, so the stream read those rows for nobody.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Block:
    start: int  # stream row of its first row
    rows: int
    item: Any  # what the consumers take (an ObjectRef in the hub)
    nbytes: int = 0  # its size, where the producer knows it (for the report)


class StreamWindow:
    """See the module docstring. Consumers are named by any hashable id."""

    def __init__(self, bound_rows: int):
        if bound_rows < 1:
            raise ValueError(f"bound_rows must be at least 1, got {bound_rows}")
        self.bound = bound_rows
        self.blocks: deque[Block] = deque()
        self.head = 0  # rows appended
        self.positions: dict[Any, int] = {}  # consumer -> stream row of its next block
        self.finished = False  # the producer has appended its last block
        self.attached_ever = False
        self.peak_rows = 0  # the most rows ever held at once
        self.peak_bytes = 0  # the most bytes (Block.nbytes) ever held at once

    @property
    def base(self) -> int:
        """Stream row of the oldest held block (the head when none is held)."""
        return self.blocks[0].start if self.blocks else self.head

    def held_rows(self) -> int:
        return self.head - self.base

    def attach(self, consumer) -> int:
        """Start `consumer` at the oldest held block; returns its stream row."""
        if consumer in self.positions:
            raise ValueError(f"consumer {consumer!r} is already attached")
        self.positions[consumer] = self.base
        self.attached_ever = True
        return self.base

    def detach(self, consumer) -> None:
        """Forget `consumer` (no error if it is not attached) and release what only it held
        while others are attached (the last one's unread blocks stay for the next)."""
        self.positions.pop(consumer, None)
        self._release()

    def can_produce(self) -> bool:
        readers = bool(self.positions) or not self.attached_ever
        return readers and not self.finished and self.held_rows() < self.bound

    def held_bytes(self) -> int:
        return sum(b.nbytes for b in self.blocks)

    def append(self, rows: int, item, nbytes: int = 0) -> None:
        if self.finished:
            raise ValueError("the stream has finished: nothing can be appended")
        if rows < 1:
            raise ValueError(f"a block has at least one row, got {rows}")
        self.blocks.append(Block(self.head, rows, item, nbytes))
        self.head += rows
        self.peak_rows = max(self.peak_rows, self.held_rows())
        self.peak_bytes = max(self.peak_bytes, self.held_bytes())

    def finish(self) -> None:
        """The producer is done: consumers at the head have reached the end."""
        self.finished = True

    def available(self, consumer) -> bool:
        return self.positions[consumer] < self.head

    def at_end(self, consumer) -> bool:
        return self.finished and not self.available(consumer)

    def advance(self, consumer) -> Block | None:
        """The consumer's next block, or None when it is at the head; moves it past the block."""
        pos = self.positions[consumer]
        if pos >= self.head:
            return None
        block = next(b for b in self.blocks if b.start == pos)
        self.positions[consumer] = pos + block.rows
        self._release()
        return block

    def slowest(self):
        """The consumer that holds the oldest block (None when none is attached)."""
        return min(self.positions, key=self.positions.__getitem__, default=None)

    def _release(self) -> None:
        if not self.positions:
            return  # nobody attached: what the last consumer left unread waits for the next
        low = min(self.positions.values())
        while self.blocks and self.blocks[0].start + self.blocks[0].rows <= low:
            self.blocks.popleft()

    def state(self) -> dict[str, Any]:
        """Plain numbers for a report or an error message."""
        return {"head": self.head, "base": self.base, "held_rows": self.held_rows(), "bound_rows": self.bound,
                "peak_rows": self.peak_rows, "peak_bytes": self.peak_bytes, "finished": self.finished,
                "positions": {str(k): v for k, v in self.positions.items()}}
