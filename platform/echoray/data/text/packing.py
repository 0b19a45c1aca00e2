"""Decode, tokenize and pack one read unit into fixed-length sequences.

A unit's pieces are decoded as UTF-8 (invalid bytes replaced by U+FFFD and
counted), tokenized, concatenated with the end-of-document id after every piece
that ends its document, and cut into rows of seq_len + 1 tokens (inputs are a
row's first seq_len tokens, targets its last seq_len). The tail shorter than a row
is dropped. Sequence k of unit u has sample_id base[u] + k: the ids depend on the
corpus, range_bytes, tokenizer and seq_len only, never on which actor read the unit
or when, so the index (driver) and the actors agree by running this same code.
"""

from __future__ import annotations

import codecs
import threading

import numpy as np

_counts = threading.local()


def _count_and_replace(exc: UnicodeDecodeError):
    _counts.n = getattr(_counts, "n", 0) + 1
    return "\ufffd", exc.end


codecs.register_error("echoray_count_replace", _count_and_replace)


def decode_utf8(data: bytes) -> tuple[str, int]:
    """(text, number of invalid byte sequences replaced by U+FFFD)."""
    try:
        return data.decode("utf-8"), 0
    except UnicodeDecodeError:
        _counts.n = 0
        text = data.decode("utf-8", errors="echoray_count_replace")
        return text, _counts.n


def unit_tokens(texts: list[str], ends: list[bool], tokenizer) -> np.ndarray:
    """The unit's token stream: each piece's tokens, then end-of-document where it ends one."""
    parts = []
    for ids, end in zip(tokenizer.encode(texts), ends, strict=True):
        parts.append(ids)
        if end:
            parts.append(np.array([tokenizer.eod], dtype=np.int32))
    return np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)


def token_dtype(vocab_size: int):
    return np.uint16 if vocab_size <= 1 << 16 else np.int32


def pack(tokens: np.ndarray, seq_len: int, dtype=np.int32) -> np.ndarray:
    """rows x (seq_len + 1), the stream's whole rows in order (the short tail dropped)."""
    width = seq_len + 1
    n = len(tokens) // width
    return np.ascontiguousarray(tokens[: n * width].reshape(n, width).astype(dtype))


def sequences_in(n_tokens: int, seq_len: int) -> int:
    return n_tokens // (seq_len + 1)
