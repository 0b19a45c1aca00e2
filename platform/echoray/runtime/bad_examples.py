"""The run's budget of undecodable training examples (source.max_bad_fraction): every
preprocessing actor reports what it could not decode; within the budget they are skipped
(and a restarted worker group leaves them out), beyond it the run fails naming the first
files. Pure: the collector actor only hosts it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

SHOWN = 5  # files named in the message and the summary


@dataclass
class BadExamples:
    n_train: int = 0
    max_bad_fraction: float = 0.0
    bad: dict[int, tuple[str, str]] = field(default_factory=dict)  # sample id -> (file, reason)

    @property
    def limit(self) -> int:
        return int(self.max_bad_fraction * self.n_train)

    def add(self, items: list[tuple[int, str, str]]) -> dict[str, Any]:
        """(id, file, reason) of newly found ones -> {"count", "over", "message"}; an id
        reported twice (an echo copy, a replayed epoch) counts once."""
        for sid, name, reason in items:
            self.bad.setdefault(int(sid), (name, reason))
        message = (f"{len(self.bad)} undecodable training image(s), more than source.max_bad_fraction="
                   f"{self.max_bad_fraction:g} of {self.n_train} allows ({self.limit}): "
                   + "; ".join(f"{n} ({r})" for n, r in list(self.bad.values())[:SHOWN]))
        return {"count": len(self.bad), "over": len(self.bad) > self.limit, "message": message}

    def ids(self) -> np.ndarray:
        return np.asarray(sorted(self.bad), dtype=np.int64)

    def shown_files(self) -> list[str]:
        return [n for n, _ in list(self.bad.values())[:SHOWN]]
