"""One readable line for a failure that crossed Ray's process boundaries."""

from __future__ import annotations

import re

# An outage a reader gave up on (storage/retry.py StoreUnavailable) reaches the driver inside
# Ray Data's "UDF failed to process a data block" error, whose last line names no URI; the
# worker's traceback in its text still holds the outage's own line.
_OUTAGE = re.compile(r"^(?:[\w.]+\.)?StoreUnavailable: (.+)$", re.MULTILINE)


def describe_failure(exc: BaseException) -> str:
    """For Ray Train's worker-group error, the first worker's own error; a Ray task error
    (a Tune trial) is unwrapped to its cause first; an object store outage is named by its
    own line wherever the error's text holds it."""
    outage = _OUTAGE.findall(str(exc))
    if outage:
        return f"StoreUnavailable: {outage[-1].strip()}"
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
