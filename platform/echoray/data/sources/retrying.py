"""A source reader whose reads wait out an object store outage (TrainConfig.store_retry_s).

Each read call (read, read_skipping, read_units: the methods that take the split and
fetch bytes) is retried whole through echoray/storage/retry.py RetryPolicy: reads are
idempotent, so a read that failed half-way is simply read again. Past TrainConfig.store_retry_s
the call raises StoreUnavailable naming the split's location ("source.path s3://...");
the run then fails (exit 1) and `echoray train --resume` continues it from its last
checkpoint. Local sources (no URI) get their reader unwrapped: a local disk has no
outage to wait out.
"""

from __future__ import annotations

from typing import Any

from echoray.data.sources.base import SourceIndex
from echoray.storage.fs import is_uri
from echoray.storage.retry import RetryPolicy

READS = ("read", "read_skipping", "read_units")  # each takes the split first (after ids for the first two)


def retrying(reader: Any, idx: SourceIndex) -> Any:
    """`reader` itself, or wrapped in RetryingReader when a split is read from a URI."""
    if idx.retry_s <= 0 or not any(is_uri(loc.split(" ", 1)[1]) for loc in idx.locations.values()):
        return reader
    return RetryingReader(reader, RetryPolicy(idx.retry_s), idx.locations)


class RetryingReader:
    """Delegates everything to `reader`; its READS methods run under `policy`."""

    def __init__(self, reader: Any, policy: RetryPolicy, locations: dict[str, str]):
        self._reader, self._policy, self._locations = reader, policy, locations

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # own fields not set yet (copy, pickle): no delegation loop
            raise AttributeError(name)
        attr = getattr(self._reader, name)  # AttributeError as the reader's own (read_skipping is optional)
        if name not in READS:
            return attr

        def read(*args, **kwargs):
            split = kwargs.get("split", args[0] if name == "read_units" else args[1] if len(args) > 1 else "train")
            return self._policy.call(lambda: attr(*args, **kwargs), self._locations.get(split, "source.path"))

        return read
