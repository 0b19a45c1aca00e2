"""Sources: index a dataset once on the driver, then read chunks of it anywhere.

`index_source` validates paths and counts samples (cheap, driver side); the
returned SourceIndex is plain data that travels to Ray actors, where
`open_reader` turns it into a reader of (images uint8 NHWC, labels int64).
"""

from __future__ import annotations

from echoray.config import SourceConfig
from echoray.data.sources.base import Reader, SourceError, SourceIndex


def index_source(cfg: SourceConfig) -> SourceIndex:
    if cfg.kind == "digits":
        from echoray.data.sources.digits import index
    elif cfg.kind == "cifar10":
        from echoray.data.sources.cifar10 import index
    elif cfg.kind == "image_folder":
        from echoray.data.sources.image_folder import index
    elif cfg.kind == "text":
        from echoray.data.text.source import index
    else:
        from echoray.data.sources.parquet import index
    idx = index(cfg)
    idx.read_concurrency = cfg.read_concurrency
    if len(idx.train_ids) == 0:
        raise SourceError(f"source.path {cfg.path}: the training split is empty")
    if len(idx.eval_ids) == 0:
        raise SourceError(f"source: the held-out split of {cfg.path or cfg.kind} is empty")
    return idx


def open_reader(idx: SourceIndex) -> Reader:
    if idx.kind == "digits":
        from echoray.data.sources.digits import DigitsReader as cls
    elif idx.kind == "cifar10":
        from echoray.data.sources.cifar10 import CifarReader as cls
    elif idx.kind == "image_folder":
        from echoray.data.sources.image_folder import ImageFolderReader as cls
    elif idx.kind == "text":
        from echoray.data.text.source import TextReader as cls
    else:
        from echoray.data.sources.parquet import ParquetReader as cls
    return cls(idx)


__all__ = ["Reader", "SourceError", "SourceIndex", "index_source", "open_reader"]
