"""An object-store filesystem whose every call waits out an outage for TrainConfig.store_retry_s,
for the code that writes through a filesystem it is handed and does not retry itself:
Ray Train's checkpoint uploads and Ray Tune's experiment storage.

`retrying(fs, retry_s, where)` is a pyarrow filesystem (PyFileSystem) that forwards each
call to `fs` under storage_retry.RetryPolicy: the same errors retried, the same waits,
the same log lines and StoreUnavailable naming `where` (the key and URI) at the end.

- A write is whole or not at all: open_output_stream spools what is written to a local
  temporary file and uploads it when the stream closes, and it is that upload which is
  retried (a failed object PUT can simply be sent again). The caller sees the error only
  after retry_s.
- A read downloads the whole object first (retried the same way), so a store freezing
  half-way through a download cannot fail the reader after its first bytes.
- Listing, creating, deleting and moving are single requests, retried as they are.

A local filesystem is returned as it is: there is no outage to wait out.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from echoray.storage import with_s3_options
from echoray.storage_retry import RetryPolicy

SPOOL_IN_MEMORY_BYTES = 8 << 20  # objects up to 8 MiB stay in memory on their way; larger ones go to /tmp
CHUNK = 4 << 20


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


class RetryingHandler(pafs.FileSystemHandler):
    """The calls of `fs`, each retried (see the module docstring). Picklable: Ray sends
    the filesystem to its workers."""

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

    def get_file_info(self, paths):
        return self._call(lambda: self.fs.get_file_info(paths))

    def get_file_info_selector(self, selector):
        return self._call(lambda: self.fs.get_file_info(selector), selector.base_dir)

    def create_dir(self, path, recursive):
        self._call(lambda: self.fs.create_dir(path, recursive=recursive), path)

    def delete_dir(self, path):
        self._call(lambda: self.fs.delete_dir(path), path)

    def delete_dir_contents(self, path, missing_dir_ok=False):
        self._call(lambda: self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok), path)

    def delete_root_dir_contents(self):
        raise OSError(f"{self.where}: refusing to delete the whole store")

    def delete_file(self, path):
        self._call(lambda: self.fs.delete_file(path), path)

    def move(self, src, dest):
        self._call(lambda: self.fs.move(src, dest), src)

    def copy_file(self, src, dest):
        self._call(lambda: self.fs.copy_file(src, dest), src)

    def open_input_stream(self, path):
        return pa.PythonFile(self._download(path), mode="r")

    def open_input_file(self, path):
        return pa.PythonFile(self._download(path), mode="r")

    def open_output_stream(self, path, metadata):
        return pa.PythonFile(_UploadOnClose(self, path, metadata), mode="w")

    def open_append_stream(self, path, metadata):
        raise OSError(f"{self.where} ({path}): appending to an object is not supported")

    def _download(self, path: str):
        def fetch():
            spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY_BYTES)
            with self.fs.open_input_stream(path) as src:
                while chunk := src.read(CHUNK):
                    spool.write(chunk)
            spool.seek(0)
            return spool

        return self._call(fetch, path)

    def _upload(self, path: str, spool, metadata) -> None:
        def send():
            spool.seek(0)
            with self.fs.open_output_stream(path, metadata=metadata) as out:
                shutil.copyfileobj(spool, out, CHUNK)

        self._call(send, path)


class _UploadOnClose:
    """A writable file that keeps what is written locally and uploads it, retried, on close."""

    def __init__(self, handler: RetryingHandler, path: str, metadata):
        self.handler, self.path, self.metadata = handler, path, metadata
        self.spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY_BYTES)
        self.closed = False

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def write(self, data) -> int:
        return self.spool.write(data)

    def tell(self) -> int:
        return self.spool.tell()

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.handler._upload(self.path, self.spool, self.metadata)
        finally:
            self.spool.close()
