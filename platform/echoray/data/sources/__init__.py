"""Sources: index a dataset once on the driver, then read chunks of it anywhere.

`index_source` validates paths and counts samples (cheap, driver side); the
returned SourceIndex is plain data that travels to Ray actors, where
`open_reader` turns it into a reader of (images uint8 NHWC, labels int64). A reader of
an object store retries its reads through an outage (retrying.py, TrainConfig.store_retry_s).
"""

from __future__ import annotations

from echoray.config import SourceConfig
from echoray.data.sources.base import NETWORK_READS_IN_FLIGHT, Reader, SourceError, SourceIndex
from echoray.plugins import is_import_path
from echoray.storage.fs import is_uri


def index_source(cfg: SourceConfig, retry_s: float = 120.0) -> SourceIndex:
    """`retry_s`: TrainConfig.store_retry_s, how long the readers wait out an object store outage."""
    if is_import_path(cfg.kind):  # a reader of the user's (custom.py)
        from echoray.data.sources.custom import index
    elif cfg.kind == "digits":
        from echoray.data.sources.digits import index
    elif cfg.kind == "cifar10":
        from echoray.data.sources.cifar10 import index
    elif cfg.kind == "image_folder":
        from echoray.data.sources.image_folder import index
    elif cfg.kind == "text":
        from echoray.data.text.source import index
    elif cfg.kind == "idx":
        from echoray.data.sources.idx import index
    else:
        from echoray.data.sources.parquet import index
    idx = index(cfg)
    if idx.read_concurrency is None:  # the reader did not declare its own
        idx.read_concurrency = reads_in_flight(cfg.path)
    idx.retry_s = retry_s
    if cfg.path:
        idx.locations = {"train": f"source.path {cfg.path}",
                         "eval": f"source.eval_path {cfg.eval_path}" if cfg.eval_path else f"source.path {cfg.path}"}
    if len(idx.train_ids) == 0:
        raise SourceError(f"source.path {cfg.path}: the training split is empty")
    if len(idx.eval_ids) == 0:
        raise SourceError(f"source: the held-out split of {cfg.path or cfg.kind} is empty")
    return idx


def reads_in_flight(path: str | None) -> int:
    """Reads in flight per actor of a source at `path`: NETWORK_READS_IN_FLIGHT where a read
    waits on a network (a URI such as s3://), else one (threads only contend for the cores)."""
    return NETWORK_READS_IN_FLIGHT if is_uri(path or "") else 1


def open_reader(idx: SourceIndex) -> Reader:
    if idx.reader and idx.kind == "text":  # a reader of the user's serving text units: read_units
        from echoray.data.sources.custom import text_reader as cls
    elif idx.reader:
        from echoray.data.sources.custom import CheckedReader as cls
    elif idx.kind == "digits":
        from echoray.data.sources.digits import DigitsReader as cls
    elif idx.kind == "cifar10":
        from echoray.data.sources.cifar10 import CifarReader as cls
    elif idx.kind == "image_folder":
        from echoray.data.sources.image_folder import ImageFolderReader as cls
    elif idx.kind == "text":
        from echoray.data.text.source import TextReader as cls
    elif idx.kind == "idx":
        from echoray.data.sources.idx import IdxReader as cls
    else:
        from echoray.data.sources.parquet import ParquetReader as cls
    from echoray.data.sources.retrying import retrying

    return retrying(cls(idx), idx)


__all__ = ["Reader", "SourceError", "SourceIndex", "index_source", "open_reader"]
