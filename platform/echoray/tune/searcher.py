"""Ray Tune adapter for SearchPoints: hands out point 0, 1, 2, ... and remembers where it is.

Tune requires a `Searcher` subclass; the maths lives in tune/space.py. The state is
one counter plus a fingerprint of the search, so save/restore (Tuner.restore after
an interrupt) continues the same sequence and refuses a different search.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ray.tune.search import Searcher

from echoray.config import SearchConfig, SearchParam
from echoray.tune.space import SearchPoints


class QuasiRandomSearcher(Searcher):
    """Quasi-random search points (tune/space.py) as a Ray Tune Searcher, in a fixed order.

    echoray's searches make it from the pipeline's search section (suggestions
    {"repeat", "index", "params"}); a plain tune.Tuner uses from_space (flat suggestions)."""

    RESERVED = ("repeat", "index")

    def __init__(self, points: SearchPoints, flat: bool = False):
        # No metric for Tune: nothing adapts to results, and the objective only exists
        # at a trial's end (the best trial is picked from the summary, not by Tune).
        super().__init__(metric=None, mode=None)
        self.points = points
        self.next_point = 0
        self.flat = flat
        self.constants: dict[str, Any] = {}

    @classmethod
    def from_space(cls, space: Mapping[str, Mapping[str, Any] | SearchParam], *, trials: int, repeats: int = 1,
                   seed: int = 0, sequence: str = "halton") -> QuasiRandomSearcher:
        """For a plain Tuner: `space` maps a config name to a search.space entry ({low, high,
        scale: linear|log, one_minus} or {choices}); trials x repeats points, repeat r its own
        scrambled sequence. Each trial's config is flat: {name: value, ..., "repeat": r,
        "index": i}, merged over the constant entries of the Tuner's param_space. Run it with
        tune.TuneConfig(search_alg=searcher, num_samples=len(searcher)); Tuner.restore resumes
        the sequence (save/restore), and refuses a different search."""
        reserved = sorted(set(space) & set(cls.RESERVED))
        if reserved:
            raise ValueError(f"search space names {reserved} are reserved (every trial config carries them)")
        search = SearchConfig(trials=trials, repeats=repeats, space=dict(space))
        return cls(SearchPoints(search, seed, sequence=sequence), flat=True)

    def __len__(self) -> int:
        return len(self.points)

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec) -> bool:
        """Accept the Tuner's metric and mode (kept for Tune; the points do not depend on
        results) and keep its param_space's constants to merge into every suggestion."""
        from ray.tune.search.sample import Domain

        searched = sorted(k for k, v in (config or {}).items()
                          if isinstance(v, Domain) or (isinstance(v, dict) and "grid_search" in v))
        if searched:
            raise ValueError(f"param_space entries {searched} are search spaces: give them to "
                             "QuasiRandomSearcher.from_space instead (param_space keeps constants)")
        self._metric, self._mode = metric or self._metric, mode or self._mode
        self.constants = dict(config or {})
        return True

    def fingerprint(self) -> dict[str, Any]:
        p = self.points
        return {"seed": p.seed, "trials": p.trials, "repeats": p.repeats, "sequence": p.sequence,
                "space": {k: v.model_dump(mode="json") for k, v in p.space.items()}}

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if self.next_point >= len(self.points):
            return Searcher.FINISHED
        point = self.points.point(self.next_point)
        self.next_point += 1
        if self.flat:
            return {**self.constants, **point["params"], "repeat": point["repeat"], "index": point["index"]}
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
