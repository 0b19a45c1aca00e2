"""The single-request calls of a retrying filesystem handler (echoray/storage/retrying_fs.py):
listing, creating, deleting, moving and copying, each one request, retried as it is.

A mixin of RetryingHandler: it uses the handler's `fs` (the wrapped filesystem), `where`
(the key and URI errors name) and `_call(fn, path)` (retry.RetryPolicy.call).
"""

from __future__ import annotations


class RetryingRequests:
    """pyarrow FileSystemHandler's single-request calls, each under the handler's `_call`."""

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
