"""An object-store filesystem whose every call waits out an outage for TrainConfig.store_retry_s,
for the code that writes through a filesystem it is handed and does not retry itself:
Ray Train's checkpoint uploads and Ray Tune's experiment storage.

`retrying(fs, retry_s, where)` is a pyarrow filesystem (PyFileSystem) that forwards each
call to `fs` under retry.RetryPolicy: the same errors retried, the same waits,
the same log lines and StoreUnavailable naming `where` (the key and URI) at the end.

- Listing, creating, deleting and moving are single requests, retried as they are
  (echoray/storage/retrying_requests.py).
- Reads and writes move whole objects, so a retry resends a whole object
  (echoray/storage/retrying_streams.py).

A local filesystem is returned as it is: there is no outage to wait out.
"""

from __future__ import annotations

from typing import Any

import pyarrow.fs as pafs

from echoray.storage.fs import with_s3_options
from echoray.storage.retry import RetryPolicy
from echoray.storage.retrying_requests import RetryingRequests
from echoray.storage.retrying_streams import WholeObjectStreams


def retrying(fs: pafs.FileSystem, retry_s: float, where: str) -> pafs.FileSystem:
    """`fs` with every call under RetryPolicy(retry_s) (`where`: the key and URI the log
    lines and errors name); `fs` itself when it is local or retry_s is 0."""
    if isinstance(fs, pafs.LocalFileSystem) or retry_s <= 0:
        return fs
    return pafs.PyFileSystem(RetryingHandler(_foreground_writes(fs), retry_s, where))


def _foreground_writes(fs: pafs.FileSystem) -> pafs.FileSystem:
    """An S3 filesystem like `fs` whose writes upload in the calling thread.

    pafs.copy_files calls this module's handler from Arrow's IO threads; an S3 stream's
    default background writes need an IO thread too, so once every IO thread held a
    file being closed, no upload could run (Tune's experiment sync hung; reproduced by
    tests/unit/test_retrying_fs.py with three files per IO thread)."""
    return with_s3_options(fs, background_writes=False)


class RetryingHandler(RetryingRequests, WholeObjectStreams, pafs.FileSystemHandler):
    """The calls of `fs`, each retried (see the module docstring): its single requests
    (RetryingRequests) and whole-object streams (WholeObjectStreams) through `_call`.
    Picklable: Ray sends the filesystem to its workers."""

    def __init__(self, fs: pafs.FileSystem, retry_s: float, where: str):
        self.fs, self.retry_s, self.where = fs, retry_s, where
        self.policy = RetryPolicy(retry_s)

    def __reduce__(self):
        return RetryingHandler, (self.fs, self.retry_s, self.where)

    def _call(self, fn, path: str = "") -> Any:
        return self.policy.call(fn, f"{self.where} ({path})" if path else self.where)

    def __eq__(self, other):
        return isinstance(other, RetryingHandler) and (self.fs, self.retry_s) == (other.fs, other.retry_s)

    def __ne__(self, other):
        return not self == other

    def get_type_name(self) -> str:
        return f"retrying+{self.fs.type_name}"

    def normalize_path(self, path: str) -> str:
        return self.fs.normalize_path(path)
