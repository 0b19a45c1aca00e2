"""The MNIST family's IDX files (MNIST, Fashion-MNIST, KMNIST): a folder holding
train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
t10k-labels-idx1-ubyte, each raw or gzipped (`.gz`), on local disk or in an object store.

Contract: sample id i of a split is record i of its files; t10k is the held-out split;
labels are the files' bytes and `num_classes` is the largest label of either split + 1.
Everything the run will read is checked on the driver before anything starts, each
failure naming the file: a missing file, a wrong magic number (0x00000803 images,
0x00000801 labels), a raw file whose length is not its header's, a gzip whose length
is not its header's (a truncated gzip: its ISIZE trailer, read in one request, is
checked first; a gzip of several members, whose trailer holds only the last member's
length, is then decompressed and counted), images and labels of different counts.

Reading: a raw images file is read by byte range, one ranged read per run of
consecutive ids (the CIFAR binary access pattern, the same over S3); a gzipped one
cannot be seeked, so each reader decompresses it once, on its first read, and keeps
the array. Labels (60 KB) are loaded by the index and travel with it. Measured on
Fashion-MNIST's train split, one process on the 2-core development machine (load 3):
    gzip: index 37 ms; first read 0.75 s (26 MB -> 47 MB, kept: 47 MB per reader);
          then 64 ids 44 us (random) / 99 us (consecutive)
    raw:  index 2 ms; 64 consecutive ids (one chunk of source.chunk_size 64) 73 us,
          64 scattered ids 710 us (64 ranged reads); no start cost, no memory kept
A chunk is consecutive ids, so both read an epoch in well under a second; raw files
suit many short-lived readers (a search's trials), gzip the Debian package as it is.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import numpy as np
import pyarrow.fs as pafs

from echoray.config import SourceConfig
from echoray.data.decode import resize_batch
from echoray.data.sources.base import (
    SourceError,
    SourceIndex,
    Split,
    contiguous_runs,
    filesystem,
    require_dir,
    shown,
)

IMAGES_MAGIC, LABELS_MAGIC = 0x00000803, 0x00000801
PREFIX = {"train": "train", "eval": "t10k"}


def _find(fs: pafs.FileSystem, root: str, stem: str) -> tuple[str, bool]:
    """(path, gzipped) of `stem` or `stem.gz` in root; the raw file wins (it can be seeked)."""
    for name, gz in ((stem, False), (stem + ".gz", True)):
        if fs.get_file_info(f"{root}/{name}").type == pafs.FileType.File:
            return f"{root}/{name}", gz
    raise SourceError(f"source.path {shown(fs, root)}: no {stem} or {stem}.gz (an IDX dataset needs "
                      "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
                      "t10k-labels-idx1-ubyte)")


def _gz_head(fs: pafs.FileSystem, path: str, n: int) -> bytes:
    """The first n uncompressed bytes of a gzip, decompressing only what they need."""
    d = zlib.decompressobj(wbits=31)
    out = b""
    with fs.open_input_stream(path, compression=None) as f:
        while len(out) < n:
            block = f.read(1 << 16)
            if not block:
                break
            try:
                out += d.decompress(block, n - len(out))
            except zlib.error as exc:
                raise SourceError(f"{shown(fs, path)}: not a readable gzip file ({exc})") from None
            if d.eof:
                break
    return out


def _gz_length(fs: pafs.FileSystem, path: str) -> int:
    """The uncompressed length of a gzip, all its members, decompressed in blocks and
    counted (nothing kept); -1 when it ends inside a member or is corrupt."""
    d, n, ended = zlib.decompressobj(wbits=31), 0, False
    with fs.open_input_stream(path, compression=None) as f:
        while block := f.read(1 << 20):
            while block:
                try:
                    n += len(d.decompress(block))
                except zlib.error:
                    return -1
                ended = d.eof
                block = d.unused_data if d.eof else b""
                if d.eof:  # a member ended: what follows is the next one
                    d = zlib.decompressobj(wbits=31)
    return n if ended else -1


def _header(fs: pafs.FileSystem, path: str, gz: bool, images: bool) -> tuple[tuple[int, ...], int]:
    """(dims, stored uncompressed length); checks the magic number."""
    ndim = 3 if images else 1
    want = 4 + 4 * ndim
    if gz:
        head = _gz_head(fs, path, want)
        with fs.open_input_file(path) as f:
            size = f.size()
            stored = struct.unpack("<I", f.read_at(4, size - 4))[0] if size >= 18 else -1
    else:
        with fs.open_input_file(path) as f:
            stored = f.size()
            head = f.read_at(want, 0)
    if len(head) < want:
        raise SourceError(f"{shown(fs, path)}: truncated: {len(head)} bytes, shorter than an IDX header")
    magic = struct.unpack(">I", head[:4])[0]
    expected = IMAGES_MAGIC if images else LABELS_MAGIC
    if magic != expected:
        raise SourceError(f"{shown(fs, path)}: magic number 0x{magic:08x}, expected 0x{expected:08x} "
                          f"(IDX {'images' if images else 'labels'}, unsigned bytes, {ndim} dimension(s))")
    return struct.unpack(f">{ndim}I", head[4:want]), stored


def _check_length(fs: pafs.FileSystem, path: str, gz: bool, dims: tuple[int, ...], stored: int) -> int:
    header = 4 + 4 * len(dims)
    expected = header + int(np.prod(dims))
    if gz and stored != expected % 2**32 and _gz_length(fs, path) != expected:  # several members: count
        raise SourceError(f"{shown(fs, path)}: truncated or corrupt gzip: the header says {dims[0]} records "
                          f"({expected} bytes uncompressed), the gzip trailer says {stored}")
    if not gz and stored != expected:
        what = "truncated" if stored < expected else "longer than its header says"
        raise SourceError(f"{shown(fs, path)}: {what}: the header says {dims[0]} records "
                          f"({expected} bytes), the file has {stored}")
    return header


def _read_all(fs: pafs.FileSystem, path: str, gz: bool) -> bytes:
    with fs.open_input_stream(path, compression=None) as f:
        data = f.read()
    if not gz:
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise SourceError(f"{shown(fs, path)}: not a readable gzip file ({exc})") from None


def _split(fs: pafs.FileSystem, root: str, prefix: str) -> dict:
    """One split's files, checked: {images, gz, offset, count, rows, cols, labels}."""
    img_path, img_gz = _find(fs, root, f"{prefix}-images-idx3-ubyte")
    lab_path, lab_gz = _find(fs, root, f"{prefix}-labels-idx1-ubyte")
    dims, stored = _header(fs, img_path, img_gz, images=True)
    offset = _check_length(fs, img_path, img_gz, dims, stored)
    (n_labels,), lab_stored = _header(fs, lab_path, lab_gz, images=False)
    lab_offset = _check_length(fs, lab_path, lab_gz, (n_labels,), lab_stored)
    if n_labels != dims[0]:
        raise SourceError(f"{shown(fs, img_path)} holds {dims[0]} images but {shown(fs, lab_path)} "
                          f"holds {n_labels} labels")
    labels = np.frombuffer(_read_all(fs, lab_path, lab_gz), dtype=np.uint8, offset=lab_offset)
    if len(labels) != n_labels:  # a gzip whose trailer lied
        raise SourceError(f"{shown(fs, lab_path)}: truncated: {len(labels)} of {n_labels} labels")
    return {"images": img_path, "gz": img_gz, "offset": offset, "count": dims[0], "rows": dims[1],
            "cols": dims[2], "labels": labels.copy(), "labels_path": shown(fs, lab_path)}


def index(cfg: SourceConfig) -> SourceIndex:
    fs, root = filesystem(cfg.path)
    require_dir(fs, root, "source.path")
    splits = {split: _split(fs, root, prefix) for split, prefix in PREFIX.items()}
    train, evals = splits["train"], splits["eval"]
    if (train["rows"], train["cols"]) != (evals["rows"], evals["cols"]):
        raise SourceError(f"{shown(fs, evals['images'])}: images of {evals['rows']}x{evals['cols']}, "
                          f"the training images are {train['rows']}x{train['cols']}")
    if train["rows"] != train["cols"] and cfg.image_size is None:
        raise SourceError(f"{shown(fs, train['images'])}: {train['rows']}x{train['cols']} images need "
                          "source.image_size (a square size to resize to)")
    num_classes = int(max(train["labels"].max(initial=0), evals["labels"].max(initial=0))) + 1
    return SourceIndex(
        kind="idx",
        num_classes=num_classes,
        train_ids=np.arange(train["count"], dtype=np.int64)[: cfg.limit],
        eval_ids=np.arange(evals["count"], dtype=np.int64)[: cfg.eval_limit],
        image_size=cfg.image_size or train["rows"],
        channels=1,
        details={"uri": cfg.path, **splits},
    )


class IdxReader:
    """Reads (images N x S x S x 1 uint8, labels int64) of any ids, in the order asked."""

    def __init__(self, idx: SourceIndex):
        self.idx = idx
        self.fs, _ = filesystem(idx.details["uri"])
        self.size = idx.image_size
        self._decompressed: dict[str, np.ndarray] = {}  # gzipped images, once per reader

    def _all_images(self, s: dict) -> np.ndarray:
        if s["images"] not in self._decompressed:
            raw = _read_all(self.fs, s["images"], True)
            n, r, c = s["count"], s["rows"], s["cols"]
            if len(raw) != s["offset"] + n * r * c:
                raise SourceError(f"{shown(self.fs, s['images'])}: truncated: {len(raw)} bytes decompressed, "
                                  f"the header says {s['offset'] + n * r * c}")
            self._decompressed[s["images"]] = np.frombuffer(raw, np.uint8, offset=s["offset"]).reshape(n, r, c)
        return self._decompressed[s["images"]]

    def _ranged(self, s: dict, uniq: np.ndarray) -> np.ndarray:
        rec = s["rows"] * s["cols"]
        parts = []
        with self.fs.open_input_file(s["images"]) as f:
            for a, b in contiguous_runs(uniq):
                raw = f.read_at((b - a) * rec, s["offset"] + a * rec)
                parts.append(np.frombuffer(raw, np.uint8).reshape(b - a, s["rows"], s["cols"]))
        return np.concatenate(parts)

    def read(self, ids: np.ndarray, split: Split) -> tuple[np.ndarray, np.ndarray]:
        s = self.idx.details[split]
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) and (ids.min() < 0 or ids.max() >= s["count"]):
            raise SourceError(f"{shown(self.fs, s['images'])}: sample id out of range 0..{s['count'] - 1}")
        if s["gz"]:
            images = self._all_images(s)[ids]
        else:  # each distinct id read once, in file order; duplicates re-expand
            uniq, inverse = np.unique(ids, return_inverse=True)
            images = self._ranged(s, uniq)[inverse] if len(ids) else np.empty((0, s["rows"], s["cols"]), np.uint8)
        return resize_batch(np.ascontiguousarray(images[..., None]), self.size), s["labels"][ids].astype(np.int64)
