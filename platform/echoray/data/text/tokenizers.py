"""Tokenizers of the text source: `bytes` and byte-level `bpe` (Hugging Face tokenizers).

Contract of both: `encode(texts) -> list of int arrays`, `lengths(texts)` (the length of
each of those arrays, cheaper), `eod` (the end-of-document
id appended after each document), `vocab_size`, and `token_bytes` (the UTF-8 byte
length of every id, 0 for end-of-document), from which held-out loss is turned
into bits per byte: comparable across tokenizers because the bytes are the same.
A tokenizer travels to actors as a `spec` (kind, and the BPE's tokenizer.json text).
"""

from __future__ import annotations

import numpy as np

EOD_TOKEN = "<|endoftext|>"


class ByteTokenizer:
    """The UTF-8 bytes of the text, one id each (0..255), end-of-document 256."""

    kind = "bytes"
    vocab_size = 257
    eod = 256

    def encode(self, texts: list[str]) -> list[np.ndarray]:
        return [np.frombuffer(t.encode("utf-8"), dtype=np.uint8).astype(np.int32) for t in texts]

    def lengths(self, texts: list[str]) -> list[int]:
        """len(ids) of each text's encoding, without the ids."""
        return [len(t.encode("utf-8")) for t in texts]

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids if i < 256).decode("utf-8", errors="replace")

    @property
    def token_bytes(self) -> np.ndarray:
        return np.array([1] * 256 + [0], dtype=np.int64)

    def spec(self) -> dict:
        return {"kind": "bytes"}


class BpeTokenizer:
    """A byte-level BPE (GPT-2 style pre-tokenization, no added prefix space)."""

    kind = "bpe"

    def __init__(self, json_text: str):
        from tokenizers import Tokenizer

        self.json_text = json_text
        self.tok = Tokenizer.from_str(json_text)
        self.eod = self.tok.token_to_id(EOD_TOKEN)
        if self.eod is None:
            raise ValueError(f"tokenizer has no {EOD_TOKEN} token")
        self.vocab_size = self.tok.get_vocab_size()

    def encode(self, texts: list[str]) -> list[np.ndarray]:
        out = self.tok.encode_batch_fast(texts, add_special_tokens=False) if texts else []
        return [np.asarray(e.ids, dtype=np.int32) for e in out]

    def lengths(self, texts: list[str]) -> list[int]:
        """len(ids) of each text's encoding, without making the ids (one batch call)."""
        return [len(e) for e in self.tok.encode_batch_fast(texts, add_special_tokens=False)] if texts else []

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids], skip_special_tokens=True)

    @property
    def token_bytes(self) -> np.ndarray:
        to_byte = {c: b for b, c in _byte_chars().items()}
        lengths = np.zeros(self.vocab_size, dtype=np.int64)
        for token, i in self.tok.get_vocab().items():
            if token != EOD_TOKEN:
                lengths[i] = sum(1 for ch in token if ch in to_byte)
        return lengths

    def spec(self) -> dict:
        return {"kind": "bpe", "json": self.json_text}


def _byte_chars() -> dict[int, str]:
    """GPT-2's byte -> printable character map, which byte-level BPE tokens are spelt in."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return chars


def train_bpe(texts, vocab_size: int) -> BpeTokenizer:
    """A byte-level BPE trained on the iterable of documents `texts`. The trainer is
    deterministic for one input order (callers pass a seeded, ordered sample)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOD_TOKEN], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return BpeTokenizer(tok.to_str())


def from_spec(spec: dict):
    return ByteTokenizer() if spec["kind"] == "bytes" else BpeTokenizer(spec["json"])
