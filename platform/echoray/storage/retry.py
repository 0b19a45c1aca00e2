"""What a run does when its object store stops answering: which errors are retried, how
long, and with what waits between tries (`TrainConfig.store_retry_s`: half of train.stall_timeout_s).

One decision, made here and read by every caller (the source's reads in
data/sources/__init__.py, the checkpoint writes of recovery/checkpoint_store.py):

- retried: the store is unreachable or overloaded for now: connection refused or
  reset, a request timed out (a frozen server: pyarrow's request timeout, storage/fs.py),
  HTTP 5xx, SlowDown / throttling;
- not retried: the request itself is wrong and would be refused again: access
  denied (403), no such key or bucket (404), bad credentials, a local file missing;
  and any other error (only known transient failures wait).

Schedule: after the n-th failed try (n = 0, 1, ...) wait FIRST_S * 2**n, at most CAP_S
(0.5, 1, 2, 4, 8, 8, ... s), until `retry_s` have passed since the first failure; the
last wait is cut so one more try starts exactly at `retry_s`, and if that fails too the
call raises StoreUnavailable naming the URI. No jitter: a run has a handful of
clients (preprocessing actors, one checkpointing process), not a fleet.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
FIRST_S, CAP_S = 0.5, 8.0
log = logging.getLogger("echoray.storage")

# Checked first: the request is wrong, a retry gets the same answer.
_PERMANENT = re.compile(
    r"ACCESS_DENIED|AccessDenied|HTTP status 40[134]\b|NO_SUCH_BUCKET|NoSuchBucket|NO_SUCH_KEY|NoSuchKey|"
    r"RESOURCE_NOT_FOUND|InvalidAccessKeyId|SignatureDoesNotMatch|INVALID_ACCESS_KEY_ID|InvalidBucketName")
# The store is away or overloaded for now (pyarrow/AWS SDK and curl wordings; Ray Data's
# DEFAULT_RETRIED_IO_ERRORS names the same "AWS Error NETWORK_CONNECTION", "SLOW_DOWN",
# "UNKNOWN (HTTP status 503)", "SERVICE_UNAVAILABLE", "INTERNAL_FAILURE").
_TRANSIENT = re.compile(
    r"NETWORK_CONNECTION|curlCode|Timeout was reached|timed out|Connection refused|Connection reset|"
    r"Couldn't connect|HTTP status 5\d\d\b|SLOW_DOWN|SlowDown|SERVICE_UNAVAILABLE|ServiceUnavailable|"
    r"INTERNAL_FAILURE|InternalError|THROTTLING|Throttl|REQUEST_TIMEOUT|RequestTimeout|"
    r"REQUEST_TIME_TOO_SKEWED|Broken pipe|Server returned nothing|Failure when receiving data",
    re.IGNORECASE)


class Transient(OSError):
    """An error its raiser knows a retry can fix (an upload found incomplete after an outage)."""


class StoreUnavailable(RuntimeError):
    """The object store did not answer within TrainConfig.store_retry_s; the message names the URI.
    A failure of the run (exit 1), not bad input: the same run may succeed later."""


def retryable(exc: BaseException) -> bool:
    """Whether `exc` is an outage worth waiting out (see the module docstring)."""
    if isinstance(exc, (FileNotFoundError, PermissionError, NotADirectoryError, IsADirectoryError)):
        return False
    if isinstance(exc, (Transient, ConnectionError, TimeoutError)):  # refused, reset, aborted; socket timeouts
        return True
    if not isinstance(exc, OSError):  # pyarrow raises OSError for every store failure
        return False
    text = str(exc)
    return not _PERMANENT.search(text) and bool(_TRANSIENT.search(text))


@dataclass(frozen=True)
class RetryPolicy:
    """`retry_s`: how long one call keeps trying after its first failure (0: never)."""

    retry_s: float = 120.0
    first_s: float = FIRST_S
    cap_s: float = CAP_S

    def wait(self, failures: int, elapsed_s: float) -> float | None:
        """Seconds to wait after the `failures`-th failed try (1 = the first) when
        `elapsed_s` have passed since the first failure; None: give up."""
        if elapsed_s >= self.retry_s:
            return None
        return min(self.first_s * 2 ** (failures - 1), self.cap_s, self.retry_s - elapsed_s)

    def schedule(self) -> list[float]:
        """The waits of an outage that outlasts retry_s, with tries taking no time."""
        waits, elapsed = [], 0.0
        while (w := self.wait(len(waits) + 1, elapsed)) is not None:
            waits.append(w)
            elapsed += w
        return waits

    def call(self, fn: Callable[[], T], where: str, *, clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> T:
        """fn(), retried while it fails with a retryable error (`where`: the key and URI,
        for the log lines and the final error)."""
        first: float | None = None
        failures = 0
        while True:
            try:
                out = fn()
            except Exception as exc:
                if not retryable(exc):
                    raise
                now = clock()
                first = now if first is None else first
                failures += 1
                wait = self.wait(failures, now - first)
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                if wait is None:
                    raise StoreUnavailable(
                        f"{where}: the object store did not answer for {now - first:.0f} s "
                        f"(retried for {self.retry_s:g} s, half of train.stall_timeout_s): {reason}") from exc
                if failures == 1:
                    log.warning("%s: object store not answering (%s); retrying for up to %g s "
                                "(half of train.stall_timeout_s)", where, reason, self.retry_s)
                sleep(wait)
                continue
            if failures:
                log.warning("%s: object store answered again after %d failed tries (%.1f s)",
                            where, failures, clock() - first)
            return out
