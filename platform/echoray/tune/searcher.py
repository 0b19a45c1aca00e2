"""Ray Tune adapter for SearchPoints: hands out point 0, 1, 2, ... and remembers where it is.

Tune requires a `Searcher` subclass; the maths lives in tune/space.py. The state is
one counter plus a fingerprint of the search, so save/restore (Tuner.restore after
an interrupt) continues the same sequence and refuses a different search.
"""

from __future__ import annotations

import json
from typing import Any

from ray.tune.search import Searcher

from echoray.tune.space import SearchPoints


class QuasiRandomSearcher(Searcher):
    def __init__(self, points: SearchPoints):
        # No metric for Tune: nothing adapts to results, and the objective only exists
        # at a trial's end (the best trial is picked from the summary, not by Tune).
        super().__init__(metric=None, mode=None)
        self.points = points
        self.next_point = 0

    def fingerprint(self) -> dict[str, Any]:
        p = self.points
        return {"seed": p.seed, "trials": p.trials, "repeats": p.repeats, "sequence": p.sequence,
                "space": {k: v.model_dump(mode="json") for k, v in p.space.items()}}

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if self.next_point >= len(self.points):
            return Searcher.FINISHED
        point = self.points.point(self.next_point)
        self.next_point += 1
        return point

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        """Nothing adapts: quasi-random points do not depend on earlier results."""

    def get_state(self) -> dict[str, Any]:
        return {"next_point": self.next_point, "fingerprint": self.fingerprint()}

    def set_state(self, state: dict[str, Any]) -> None:
        if state["fingerprint"] != self.fingerprint():
            raise ValueError("saved search state belongs to a different search (seed, space or size changed)")
        self.next_point = int(state["next_point"])

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "w") as f:
            json.dump(self.get_state(), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path) as f:
            self.set_state(json.load(f))
