"""What a text run records beside its metrics: tokenizer.json and summary.json's `text`.

The BPE tokenizer a run trained (or loaded) is written to RUN_DIR/tokenizer.json and
logged to MLflow, so `source.tokenizer.path` can reuse it; the bytes tokenizer has
nothing to save. `fresh_tokens`/`trained_tokens` count predicted tokens: seq_len per
sequence (a row holds seq_len + 1 tokens, its inputs and next-token targets).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

LM_EPOCH_KEYS = ("bits_per_byte", "perplexity", "eval_loss", "fresh_tokens")


def save_tokenizer(idx, run_dir: Path) -> Path | None:
    spec = idx.details.get("tokenizer") if idx.kind == "text" else None
    if not spec or spec["kind"] != "bpe":
        return None
    path = run_dir / "tokenizer.json"
    path.write_text(spec["json"])
    return path


def share_tokenizer(idx, tree: dict, folder: Path) -> dict:
    """A search's pipeline tree whose trials load the BPE the search trained (saved in its
    folder) instead of each training the same one again; `tree` itself when there is none."""
    path = save_tokenizer(idx, folder)
    if path is None or tree["source"]["tokenizer"].get("path"):
        return tree
    return {**tree, "source": {**tree["source"], "tokenizer": {**tree["source"]["tokenizer"],
                                                               "path": str(path.resolve())}}}


def resumed_tokenizer(cfg, run_dir: Path | None):
    """A resumed BPE run loads the tokenizer.json its first start saved (the same one it
    would train again, without the training)."""
    tok = cfg.source.tokenizer
    saved = run_dir / "tokenizer.json" if run_dir is not None else None
    if cfg.model.name != "transformer_lm" or tok.kind != "bpe" or tok.path or saved is None or not saved.is_file():
        return cfg
    return cfg.model_copy(update={"source": cfg.source.model_copy(
        update={"tokenizer": tok.model_copy(update={"path": str(saved)})})})


def text_summary(idx, final: dict[str, Any]) -> dict[str, Any] | None:
    if idx.kind != "text":
        return None
    d = idx.details
    seq_len = d["seq_len"]
    return {
        "tokenizer": d["tokenizer"]["kind"], "vocab_size": idx.num_classes, "seq_len": seq_len,
        "fresh_tokens": final["fresh_examples"] * seq_len,
        "trained_tokens": final.get("trained_samples", final["trained_examples"]) * seq_len,
        "train": d["stats"]["train"], "eval": d["stats"]["eval"],
    }
