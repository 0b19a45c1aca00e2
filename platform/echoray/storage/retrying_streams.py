"""Whole-object streams of a retrying filesystem handler (echoray/storage/retrying_fs.py).

- A write is whole or not at all: open_output_stream spools what is written to a local
  temporary file and uploads it when the stream closes, and it is that upload which is
  retried (a failed object PUT can simply be sent again). The caller sees the error only
  after the retry time.
- A read downloads the whole object first (retried the same way), so a store freezing
  half-way through a download cannot fail the reader after its first bytes.

A mixin of RetryingHandler: it uses the handler's `fs`, `where` and `_call(fn, path)`.
"""

from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa

SPOOL_IN_MEMORY_BYTES = 8 << 20  # objects up to 8 MiB stay in memory on their way; larger ones go to /tmp
CHUNK = 4 << 20


class WholeObjectStreams:
    """pyarrow FileSystemHandler's stream calls: downloads and uploads of whole objects."""

    def open_input_stream(self, path):
        return pa.PythonFile(self._download(path), mode="r")

    def open_input_file(self, path):
        return pa.PythonFile(self._download(path), mode="r")

    def open_output_stream(self, path, metadata):
        return pa.PythonFile(UploadOnClose(self, path, metadata), mode="w")

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


class UploadOnClose:
    """A writable file that keeps what is written locally and uploads it, retried, on close."""

    def __init__(self, streams: WholeObjectStreams, path: str, metadata):
        self.streams, self.path, self.metadata = streams, path, metadata
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
            self.streams._upload(self.path, self.spool, self.metadata)
        finally:
            self.spool.close()
