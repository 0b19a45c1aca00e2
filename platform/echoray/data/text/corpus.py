"""A text corpus as documents and read units (the text source's read plan).

A document is one file under the corpus folder (local or `s3://`) whose name ends
in one of `source.text_suffixes`, optionally followed by `.gz`. A read unit is
what one preprocessing call reads: a list of pieces (document, start, stop) of
byte ranges. Every plain document larger than `range_bytes` is cut into ranges
that end just after a newline (so several actors share one big file); a `.gz`
document is one whole range (gzip cannot be entered mid-stream); consecutive
small documents are grouped into one unit of about `range_bytes`. Units cover
every byte of every document exactly once, in path order.

Parquet (`source.text_column` set): every row group of every `.parquet` file is one
entry of the document list (one range, read whole); each of its rows is a document
(end-of-document after each; a null cell is an empty document, no tokens at all).
"""

from __future__ import annotations

import fnmatch
import gzip
import zlib
from dataclasses import dataclass

import pyarrow.fs as pafs

from echoray.data.sources.base import SourceError, require_dir, shown

WHOLE = -1  # a piece's stop for "to the end of the (decompressed) document"
SCAN_BYTES = 64 << 10  # read this much at a time looking for a range's newline


@dataclass(frozen=True)
class Document:
    path: str  # as the filesystem names it (no scheme)
    size: int  # bytes stored (compressed for .gz; the row group's for Parquet)
    gz: bool
    row_group: int = -1  # Parquet: which row group of the file this entry is
    column: str | None = None  # Parquet: the text column


Piece = tuple[int, int, int]  # (document index, start byte, stop byte or WHOLE)


def parquet_documents(fs: pafs.FileSystem, paths: list[str], column: str, key: str) -> list[Document]:
    """One entry per row group of each file; SourceError naming the file without the column."""
    import pyarrow.parquet as pq

    docs = []
    for path in paths:
        with fs.open_input_file(path) as f:
            meta = pq.ParquetFile(f).metadata
            names = meta.schema.to_arrow_schema().names
            if column not in names:
                raise SourceError(f"{key} {shown(fs, path)}: no column {column!r} (source.text_column); "
                                  f"it has {', '.join(names)}")
            docs.extend(Document(path, meta.row_group(g).total_byte_size, False, g, column)
                        for g in range(meta.num_row_groups))
    return docs


def list_documents(fs: pafs.FileSystem, root: str, suffixes: list[str], key: str,
                   exclude: list[str] = (), column: str | None = None) -> list[Document]:
    """Every document under root (but paths relative to root matching an `exclude` glob),
    sorted by path; SourceError naming root when none."""
    if column is not None and fs.get_file_info(root).type == pafs.FileType.File:
        return parquet_documents(fs, [root], column, key)  # one Parquet file
    require_dir(fs, root, key)
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    wanted = (".parquet",) if column is not None else tuple(s.lower() for s in suffixes)
    base = root.rstrip("/") + "/"
    docs = []
    for info in infos:
        if info.type != pafs.FileType.File or info.base_name.startswith("."):
            continue
        rel = info.path[len(base):] if info.path.startswith(base) else info.base_name
        if any(fnmatch.fnmatch(rel, pat) for pat in exclude):
            continue
        name = info.base_name.lower()
        gz = name.endswith(".gz") and column is None
        if (name[:-3] if gz else name).endswith(wanted):
            docs.append(Document(info.path, int(info.size), gz))
    if not docs:
        what = "Parquet files" if column is not None else f"files ending in {', '.join(suffixes)}, optionally .gz"
        raise SourceError(f"{key} {shown(fs, root)}: no text documents ({what})")
    docs.sort(key=lambda d: d.path)
    return parquet_documents(fs, [d.path for d in docs], column, key) if column is not None else docs


def next_line_start(fs: pafs.FileSystem, doc: Document, pos: int) -> int:
    """The first offset >= pos that starts a line (just after a newline), or doc.size."""
    if pos <= 0:
        return 0
    with fs.open_input_file(doc.path) as f:
        at = pos - 1  # the byte before pos may itself be the newline
        while at < doc.size:
            chunk = f.read_at(min(SCAN_BYTES, doc.size - at), at)
            hit = chunk.find(b"\n")
            if hit >= 0:
                return at + hit + 1
            at += len(chunk)
    return doc.size


def document_ranges(fs: pafs.FileSystem, doc: Document, index: int, range_bytes: int) -> list[Piece]:
    """A document's pieces: one whole piece for .gz or small files, else line-cut ranges."""
    if doc.gz or doc.column is not None or doc.size <= range_bytes:
        return [(index, 0, WHOLE)]
    cuts = [0]
    while cuts[-1] < doc.size:
        nxt = next_line_start(fs, doc, cuts[-1] + range_bytes)
        cuts.append(max(nxt, cuts[-1] + 1) if nxt < doc.size else doc.size)
    return [(index, a, b) for a, b in zip(cuts, cuts[1:], strict=False)]


def read_units(fs: pafs.FileSystem, docs: list[Document], doc_ids: list[int],
               range_bytes: int) -> list[list[Piece]]:
    """The units over the documents doc_ids (in that order): ranges of big documents alone,
    small consecutive ones grouped up to range_bytes (stored bytes)."""
    units: list[list[Piece]] = []
    group: list[Piece] = []
    group_bytes = 0
    for i in doc_ids:
        pieces = document_ranges(fs, docs[i], i, range_bytes)
        if len(pieces) > 1:
            units.extend([p] for p in pieces)
            continue
        if group and group_bytes + docs[i].size > range_bytes:
            units.append(group)
            group, group_bytes = [], 0
        group.append(pieces[0])
        group_bytes += docs[i].size
    if group:
        units.append(group)
    return units


def piece_bytes(fs: pafs.FileSystem, doc: Document, start: int, stop: int) -> bytes:
    """The raw (decompressed) bytes of a piece; SourceError naming the file if unreadable."""
    try:
        if doc.gz:
            with fs.open_input_stream(doc.path, compression=None) as f:
                return gzip.decompress(f.read())
        with fs.open_input_file(doc.path) as f:
            end = doc.size if stop == WHOLE else stop
            return f.read_at(end - start, start)
    except (OSError, EOFError, zlib.error) as exc:
        raise SourceError(f"cannot read text document {shown(fs, doc.path)}: {exc}") from None


def piece_texts(fs: pafs.FileSystem, doc: Document, start: int, stop: int) -> list[tuple[bytes, bool]]:
    """(raw UTF-8 bytes, ends a document) of each text in a piece: one for a file range,
    one per non-null row for a Parquet row group."""
    if doc.column is None:
        return [(piece_bytes(fs, doc, start, stop), ends_document(doc, stop))]
    import pyarrow.parquet as pq

    try:
        with fs.open_input_file(doc.path) as f:
            col = pq.ParquetFile(f).read_row_group(doc.row_group, columns=[doc.column]).column(0)
    except (OSError, ValueError) as exc:
        raise SourceError(f"cannot read text column {doc.column!r} of {shown(fs, doc.path)}: {exc}") from None
    return [(v.encode("utf-8") if isinstance(v, str) else bytes(v), True) for v in col.to_pylist() if v is not None]


def ends_document(doc: Document, stop: int) -> bool:
    return stop == WHOLE or stop >= doc.size
