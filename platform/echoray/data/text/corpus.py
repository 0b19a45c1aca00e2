"""A text corpus as documents and read units (the text source's read plan).

A document is one file under the corpus folder (local or `s3://`) whose name ends
in one of `source.text_suffixes`, optionally followed by `.gz`. A read unit is
what one preprocessing call reads: a list of pieces (document, start, stop) of
byte ranges. Every plain document larger than `range_bytes` is cut into ranges
that end just after a newline (so several actors share one big file). A `.gz`
document of more than `range_bytes` stored is cut the same way, by the offsets of its
decompressed text, where the plain file's cuts would be; the planner reads it once to
check it and to build an access-point index (`indexed_gzip`), with which a reader starts
a range near its first byte instead of decompressing the whole file. Smaller `.gz`
documents are read whole. Consecutive small documents are grouped into one unit of
about `range_bytes`. Units cover every byte of every document exactly once, in path
order.

Parquet (`source.text_column` set): every row group of every `.parquet` file is one
entry of the document list (one range, read whole); each of its rows is a document
(end-of-document after each; a null cell is an empty document, no tokens at all).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import gzip
import io
import zlib
from collections.abc import Callable
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
    gz_cuts: tuple[int, ...] = ()  # a cut .gz (gz_indexed): its ranges' bounds in the decompressed text
    gz_index: bytes = b""  # a cut .gz: its indexed_gzip access points, b"" where its text has one

    @property
    def length(self) -> int:
        """Bytes of the text a range's offsets count: decompressed for a cut .gz."""
        return self.gz_cuts[-1] if self.gz_cuts else self.size


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


def line_start(read_at: Callable[[int, int], bytes], size: int, pos: int) -> int:
    """The first offset >= pos that starts a line (just after a newline), or size;
    read_at(n, offset) reads the text."""
    if pos <= 0:
        return 0
    at = pos - 1  # the byte before pos may itself be the newline
    while at < size:
        chunk = read_at(min(SCAN_BYTES, size - at), at)
        hit = chunk.find(b"\n")
        if hit >= 0:
            return at + hit + 1
        at += len(chunk)
    return size


def next_line_start(fs: pafs.FileSystem, doc: Document, pos: int) -> int:
    """The first offset >= pos of a plain document that starts a line, or doc.size."""
    with fs.open_input_file(doc.path) as f:
        return line_start(f.read_at, doc.size, pos)


def line_cuts(size: int, range_bytes: int, start_of_line: Callable[[int], int]) -> list[int]:
    """0, the line start at or after each range_bytes past the last cut, ..., size."""
    cuts = [0]
    while cuts[-1] < size:
        nxt = start_of_line(cuts[-1] + range_bytes)
        cuts.append(max(nxt, cuts[-1] + 1) if nxt < size else size)
    return cuts


def document_ranges(fs: pafs.FileSystem, doc: Document, index: int, range_bytes: int) -> list[Piece]:
    """A document's pieces: line-cut ranges of a large plain file or of a cut .gz (gz_indexed),
    else one whole piece."""
    if doc.gz_cuts:
        cuts = list(doc.gz_cuts)
    elif doc.gz or doc.column is not None or doc.size <= range_bytes:
        return [(index, 0, WHOLE)]
    else:
        cuts = line_cuts(doc.size, range_bytes, lambda pos: next_line_start(fs, doc, pos))
    return [(index, a, b) for a, b in zip(cuts, cuts[1:], strict=False)]


def gz_access_spacing(doc: Document, range_bytes: int) -> int:
    """Decompressed bytes between a cut .gz's access points: a range's read decompresses at
    most this much before its first byte, and each point keeps a 32 KiB window in the
    index every actor gets. At least range_bytes and 1 MiB, and at most about 256 points
    for text of 4x the stored size (the 24 MB Documentation tree compresses 3.6x)."""
    return max(range_bytes, 1 << 20, doc.size * 4 // 256)


def _gz_scan(fs: pafs.FileSystem, doc: Document, range_bytes: int) -> list[int]:
    """The decompressed text's line cuts (as line_cuts makes them, ending with its size),
    read once as a stream with zlib, which checks every gzip member's CRC and length: a
    truncated or corrupt file fails here, not in a run."""
    cuts, base = [0], 0
    want = range_bytes  # the next cut: the first line start at or after this offset
    d = zlib.decompressobj(wbits=31)
    with fs.open_input_stream(doc.path, compression=None) as f:
        while chunk := f.read(1 << 20):
            while chunk:
                out = d.decompress(chunk)
                while (hit := out.find(b"\n", max(0, want - 1 - base))) >= 0:
                    cuts.append(base + hit + 1)
                    want = cuts[-1] + range_bytes
                base += len(out)
                chunk = d.unused_data  # a member after this one (concatenated .gz files)
                if d.eof and chunk:
                    d = zlib.decompressobj(wbits=31)
                elif not d.eof:
                    chunk = b""
    if not d.eof:
        raise EOFError("compressed file ended before the end-of-stream marker was reached")
    return [c for c in cuts if c < base] + [base]


def gz_indexed(fs: pafs.FileSystem, doc: Document, range_bytes: int) -> Document:
    """`doc` with its cuts and access-point index where it is a .gz of more than range_bytes
    stored (else `doc`); SourceError naming the file where it does not decompress."""
    if not doc.gz or doc.size <= range_bytes:
        return doc
    import indexed_gzip

    spacing = gz_access_spacing(doc, range_bytes)
    out = io.BytesIO()
    try:
        cuts = _gz_scan(fs, doc, range_bytes)
        if cuts[-1] <= range_bytes:  # little text after all: read whole
            return doc
        if cuts[-1] > spacing:  # access points past the start: an index is worth its windows
            with fs.open_input_file(doc.path) as f:
                g = indexed_gzip.IndexedGzipFile(fileobj=f, spacing=spacing)
                try:
                    g.build_full_index()
                    g.export_index(fileobj=out)
                finally:
                    g.close()
    except (OSError, EOFError, zlib.error) as exc:
        raise SourceError(f"cannot read text document {shown(fs, doc.path)}: {exc}") from None
    return dataclasses.replace(doc, gz_cuts=tuple(cuts), gz_index=out.getvalue())


def gz_range_read(fs: pafs.FileSystem, doc: Document, start: int, stop: int) -> bytes:
    """Bytes start..stop of a cut .gz's text, decompressed from the access point before
    start (from the file's start where it has no index), and no further than stop."""
    stop = doc.length if stop == WHOLE else stop
    if not doc.gz_index:
        with fs.open_input_stream(doc.path, compression=None) as f, gzip.GzipFile(fileobj=f) as g:
            g.seek(start)  # decompresses up to start, keeping none of it
            return g.read(stop - start)
    import indexed_gzip

    with fs.open_input_file(doc.path) as f:
        g = indexed_gzip.IndexedGzipFile(fileobj=f, spacing=gz_access_spacing(doc, 0))
        try:
            g.import_index(fileobj=io.BytesIO(doc.gz_index))
            g.seek(start)
            return g.read(stop - start)
        finally:
            g.close()


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
        if doc.gz_cuts:
            return gz_range_read(fs, doc, start, stop)
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
    return stop == WHOLE or stop >= doc.length
