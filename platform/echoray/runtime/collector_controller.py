"""What the run's collector (runtime/collector.py) takes from Ray Train's controller
(runtime/commit.py): committed checkpoints, detected worker failures, and the
controller's handle, so the driver can stop it.

A part of RunCollector: it owns `controller` and `failures`, and hands commits to the
epoch ledger (`ledger`: runtime/collector_attempts.py).
"""

from __future__ import annotations

from typing import Any


class ControllerLink:
    def _init_controller(self) -> None:
        self.controller = None  # Ray Train's controller actor, so the driver can stop it
        self.failures: list[dict[str, Any]] = []

    def committed(self, checkpoint, metrics: dict[str, Any]) -> None:
        self.ledger.committed(checkpoint, metrics)

    def failed(self, detected_at: float, errors: str) -> None:
        self.failures.append({"detected_at": detected_at, "errors": errors})

    def latest_checkpoint(self) -> dict[str, Any] | None:
        return self.ledger.commit

    def register_controller(self, handle) -> None:
        self.controller = handle

    def get_controller(self):
        return self.controller
