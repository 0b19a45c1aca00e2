"""`source.kind: text`: a folder tree of UTF-8 documents (plain or .gz, or rows of a Parquet
column: source.text_column), local or s3://.

Indexing (driver, once per run) lists the documents, splits them into training and
held-out documents (`source.eval_path`, or a fixed seeded fraction
`source.holdout_fraction` of the documents), cuts both into read units
(data/text/corpus.py), makes the tokenizer (`bytes`; `bpe` trained on a seeded
sample of training documents, or loaded from `source.tokenizer.path`) and counts
the sequences every unit packs into (data/text/packing.py), so sample ids are
dense, 0..n-1 per split, and an epoch's length is known before the run starts.
The read plan's "chunk" of a text run is a unit: the actors read (epoch, unit)
rows and emit one row per sequence: epoch, sample_id, tokens (seq_len + 1).
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time

import numpy as np

from echoray.config import SourceConfig
from echoray.data.plan import split_holdout
from echoray.data.sources.base import SourceError, SourceIndex, filesystem, shown
from echoray.data.text import corpus, packing
from echoray.data.text.tokenizers import BpeTokenizer, ByteTokenizer, from_spec, train_bpe

SPLIT_SEED = 0  # the held-out documents do not move with the pipeline's seed (searches share them)
COUNT_BATCH = 64  # units decoded and tokenized together while counting
BPE_TRAIN_BYTES = 64 << 20  # a BPE tokenizer trains on a seeded sample of at most this many bytes
UNITS_PER_CORPUS = 1024  # unit_bytes: read units a corpus is cut into, about
SEQUENCES_PER_UNIT = 32  # unit_bytes: the least bytes of a unit, in sequences of seq_len + 1 bytes
MAX_UNIT_BYTES = 1 << 20  # unit_bytes: the most


class TextReader:
    """Reads units of either split and packs them; built on every actor from the index."""

    def __init__(self, idx: SourceIndex):
        d = idx.details
        self.d, self.seq_len = d, d["seq_len"]
        self.tokenizer = from_spec(d["tokenizer"])
        self.dtype = packing.token_dtype(self.tokenizer.vocab_size)
        self.fs = {split: filesystem(d[f"{split}_uri"], d[f"{split}_key"])[0] for split in ("train", "eval")}
        self.bad_utf8 = 0  # invalid UTF-8 sequences replaced in what this reader read
        self.bytes_read = 0
        self._lock = threading.Lock()  # the index counts units from several threads

    def texts(self, split: str, unit: int) -> tuple[list[str], list[bool]]:
        docs, fs = self.d[f"{split}_docs"], self.fs[split]
        texts, ends = [], []
        for doc_i, start, stop in self.d[f"{split}_units"][unit]:
            for raw, end in corpus.piece_texts(fs, docs[doc_i], start, stop):
                text, bad = packing.decode_utf8(raw)
                with self._lock:
                    self.bytes_read += len(raw)
                    self.bad_utf8 += bad
                texts.append(text)
                ends.append(end)
        return texts, ends

    def unit_rows(self, split: str, unit: int) -> np.ndarray:
        """The unit's sequences, (n, seq_len + 1); n must match the index's count."""
        texts, ends = self.texts(split, unit)
        rows = packing.pack(packing.unit_tokens(texts, ends, self.tokenizer), self.seq_len, self.dtype)
        base = self.d[f"{split}_base"]
        if len(rows) != base[unit + 1] - base[unit]:
            raise SourceError(f"text unit {unit} of {self.d[f'{split}_uri']} changed since the run was indexed "
                              f"({len(rows)} sequences, indexed {base[unit + 1] - base[unit]})")
        return rows

    def read_units(self, split: str, epochs: np.ndarray, units: np.ndarray) -> dict[str, np.ndarray]:
        """(epoch, unit) plan rows -> epoch, sample_id, tokens of every sequence, in plan order."""
        base = self.d[f"{split}_base"]
        parts = [self.unit_rows(split, int(u)) for u in units]
        counts = [len(p) for p in parts]
        width = self.seq_len + 1
        return {
            "epoch": np.repeat(np.asarray(epochs, np.int64), counts),
            "sample_id": np.concatenate([np.arange(base[u], base[u + 1], dtype=np.int64) for u in units])
            if len(units) else np.zeros(0, np.int64),
            "tokens": np.concatenate(parts) if parts else np.zeros((0, width), self.dtype),
        }


def unit_bytes(docs: list[corpus.Document], seq_len: int) -> int:
    """Stored bytes per read unit (data/text/corpus.py cuts larger documents after a newline
    and groups smaller ones up to it): the corpus at source.path in about UNITS_PER_CORPUS
    units, so the seeded permutation shuffles finely and every actor gets many; at least
    SEQUENCES_PER_UNIT sequences of bytes (a unit's tail shorter than a sequence is not
    trained) and at most MAX_UNIT_BYTES (one ranged read)."""
    total = sum(d.size for d in docs)
    return int(min(MAX_UNIT_BYTES, max(SEQUENCES_PER_UNIT * (seq_len + 1), total // UNITS_PER_CORPUS)))


def _documents(fs, root: str, cfg: SourceConfig, key: str) -> list[corpus.Document]:
    return corpus.list_documents(fs, root, cfg.text_suffixes, key, cfg.text_exclude, cfg.text_column)


def _split_docs(cfg: SourceConfig):
    """(train fs, root, docs, doc ids, key), (eval fs, root, docs, doc ids, key), and the
    read unit's bytes (unit_bytes of source.path's documents); each .gz of more than a unit
    checked and indexed to be cut."""
    fs, root = filesystem(cfg.path, "source.path")
    docs = _documents(fs, root, cfg, "source.path")
    range_bytes = unit_bytes(docs, cfg.seq_len)
    docs = [corpus.gz_indexed(fs, d, range_bytes) for d in docs]
    if cfg.eval_path:
        efs, eroot = filesystem(cfg.eval_path, "source.eval_path")
        edocs = [corpus.gz_indexed(efs, d, range_bytes) for d in _documents(efs, eroot, cfg, "source.eval_path")]
        return (fs, cfg.path, docs, list(range(len(docs))), "source.path"), \
            (efs, cfg.eval_path, edocs, list(range(len(edocs))), "source.eval_path"), range_bytes
    if len(docs) < 2:
        raise SourceError(f"source.path {shown(fs, root)}: one document cannot be split into training and "
                          "held-out text; add documents or set source.eval_path")
    train_ids, eval_ids = split_holdout(len(docs), cfg.holdout_fraction, SPLIT_SEED)
    return (fs, cfg.path, docs, [int(i) for i in train_ids], "source.path"), \
        (fs, cfg.path, docs, [int(i) for i in eval_ids], "source.path"), range_bytes


def make_tokenizer(cfg: SourceConfig, fs, docs, doc_ids):
    t = cfg.tokenizer
    if t.kind == "bytes":
        return ByteTokenizer()
    if t.path:
        from pathlib import Path

        p = Path(t.path)
        if not p.is_file():
            raise SourceError(f"source.tokenizer.path {t.path}: no such file")
        try:
            return BpeTokenizer(p.read_text())
        except Exception as exc:  # noqa: BLE001 - a bad file, whatever the parser says
            raise SourceError(f"source.tokenizer.path {t.path}: not a usable tokenizer.json ({exc})") from None
    rng = np.random.default_rng(SPLIT_SEED)
    order = [doc_ids[i] for i in rng.permutation(len(doc_ids))]
    sample, total = [], 0
    for i in order:  # a seeded sample of whole training documents, up to BPE_TRAIN_BYTES
        if total >= BPE_TRAIN_BYTES:
            break
        for raw, _ in corpus.piece_texts(fs, docs[i], 0, corpus.WHOLE):
            sample.append(packing.decode_utf8(raw)[0])
            total += len(raw)
    return train_bpe(sample, t.vocab_size)


def _count(reader: TextReader, split: str, n_units: int) -> np.ndarray:
    """Sequences per unit, as the actors pack them: the units' texts are read in threads
    (file reads and gzip release the GIL), then COUNT_BATCH units' texts go to the
    tokenizer in one call that counts tokens only (tokenizers.lengths: the BPE's own Rust
    threads share the documents out; no id lists are made). Counting unit by unit in 4
    Python threads, each encoding its unit's texts into id arrays, was 27.8 s of a 47.2 s
    BPE index of the 24 MB Documentation tree (7 units of 1 MB stored: 4 threads had 7
    tasks; load 3-5)."""
    counts = np.zeros(n_units, np.int64)
    with cf.ThreadPoolExecutor(4) as pool:
        for s in range(0, n_units, COUNT_BATCH):
            units = list(pool.map(lambda u: reader.texts(split, u), range(s, min(n_units, s + COUNT_BATCH))))
            lengths = iter(reader.tokenizer.lengths([t for texts, _ in units for t in texts]))
            for j, (texts, ends) in enumerate(units):
                n_tokens = sum(next(lengths) for _ in texts) + sum(ends)  # + end-of-document ids
                counts[s + j] = packing.sequences_in(n_tokens, reader.seq_len)
    return counts


def index(cfg: SourceConfig) -> SourceIndex:
    """The text source's index; details["stats"]["index_s"] times its phases (list: the
    documents and the split, tokenizer: training or loading it, units: the read plan,
    count: the sequences of every unit of both splits)."""
    clock = [time.perf_counter()]

    def lap() -> float:
        clock.append(time.perf_counter())
        return round(clock[-1] - clock[-2], 3)

    train, held, range_bytes = _split_docs(cfg)
    phases = {"list": lap()}
    tokenizer = make_tokenizer(cfg, train[0], train[2], train[3])
    phases["tokenizer"] = lap()
    details = {"seq_len": cfg.seq_len, "tokenizer": tokenizer.spec(), "range_bytes": range_bytes}
    for split, (fs, uri, docs, ids, key) in (("train", train), ("eval", held)):
        details.update({f"{split}_uri": uri, f"{split}_key": key, f"{split}_docs": docs,
                        f"{split}_units": corpus.read_units(fs, docs, ids, range_bytes)})
    phases["units"] = lap()
    idx = SourceIndex(kind="text", num_classes=tokenizer.vocab_size, train_ids=np.zeros(0, np.int64),
                      eval_ids=np.zeros(0, np.int64), image_size=None, channels=1, details=details)
    stats = {}
    for split, (_, uri, _, ids, key) in (("train", train), ("eval", held)):
        details[f"{split}_base"] = np.zeros(1, np.int64)
        reader = TextReader(idx)
        counts = _count(reader, split, len(details[f"{split}_units"]))
        details[f"{split}_base"] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        if counts.sum() == 0:
            raise SourceError(f"{key} {uri}: the {'training' if split == 'train' else 'held-out'} text "
                              f"({len(ids)} document(s), {reader.bytes_read} bytes) is shorter than one "
                              f"sequence of source.seq_len + 1 = {cfg.seq_len + 1} tokens")
        stats[split] = {"documents": len(ids), "units": len(counts), "bytes": reader.bytes_read,
                        "sequences": int(counts.sum()), "invalid_utf8_replaced": reader.bad_utf8}
    phases["count"] = lap()
    details["stats"] = {**stats, "index_s": phases}
    idx.train_ids = np.arange(stats["train"]["sequences"], dtype=np.int64)
    idx.eval_ids = np.arange(stats["eval"]["sequences"], dtype=np.int64)
    return idx
