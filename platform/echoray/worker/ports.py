"""The ports the worker loop (train/loop.py WorkerEnv) is given, as typing.Protocols: what
any collector link, evaluator or checkpoint sink must offer, whether Ray supplies it
(CollectorLink, Checkpointer) or a test does (LocalLink, a scripted evaluator, a
checkpointer that records what it is given). Structural: nothing inherits from them.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from echoray.records import EpochRecord, Heartbeat


@runtime_checkable
class CollectorPort(Protocol):
    """The run's collector (runtime/collector.py): fire-and-forget sends, blocking asks, a
    heartbeat that answers whether the run was aborted, and the live echo factor."""

    def send(self, method: str, *args: Any, **kwargs: Any) -> None: ...

    def ask(self, method: str, *args: Any, **kwargs: Any) -> Any: ...

    def beat(self, beat: Heartbeat) -> bool: ...

    def live_factor(self) -> float | None: ...


@runtime_checkable
class EvaluatorPort(Protocol):
    """Scores the held-out split on every rank (a collective): an image evaluator returns
    (correct, total, tta_correct), a language model's {metric name: value}."""

    def evaluate(self, model: Any, normalize: Any, batch_size: int) -> tuple[int, int, int] | dict[str, float]: ...


@runtime_checkable
class CheckpointPort(Protocol):
    """Decides when a checkpoint is due (every rank the same) and keeps one (recovery/faults.py)."""

    def due(self, evals: int) -> bool: ...

    def save(self, *, model: Any, opt: Any, evals: int, steps: int, loop_state: dict[str, Any],
             history: list[EpochRecord], rank_state: dict[str, Any], pending: dict[str, np.ndarray] | None,
             audit: dict[str, np.ndarray] | None = None) -> None: ...
