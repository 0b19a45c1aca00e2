"""One readable line for a failure that crossed Ray's process boundaries."""

from __future__ import annotations


def describe_failure(exc: BaseException) -> str:
    """For Ray Train's worker-group error, the first worker's own error; a Ray task error
    (a Tune trial) is unwrapped to its cause first."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    failures = getattr(exc, "worker_failures", None)
    if failures:
        rank = min(failures)
        lines = [ln for ln in str(failures[rank]).splitlines() if ln.strip()]
        return f"worker {rank}: {lines[-1].strip() if lines else type(failures[rank]).__name__}"
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[-1].strip() if lines else ''}"
