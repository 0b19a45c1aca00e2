"""What the language-model benchmarks (benchmarks/lm.py and its parts) share: the small
byte-level LM they train, in-process runs on one local Ray, and reading fresh tokens to
a target out of a run's evaluation history.

The model is pipelines/lm_linux_doc.yaml (the Linux admin guide, bytes tokenizer) made
small enough that a run reaches its target within seconds on one core: width 64, 2
layers, 2 heads, seq_len 64, a constant learning rate after a short warm-up (a cosine
schedule over the budget would give every echo factor a different schedule), no
checkpoints. A read unit is derived from the corpus (data/text/source.py unit_bytes: at
least 32 sequences, 2,080 bytes here; its results files before issue 59 set 4,096), so a
run that reads a few hundred thousand tokens sees dozens of documents, not two. Every part of the benchmark adds its own keys on top (--set adds the caller's).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import common
from common import REPO

PIPELINE = str(REPO / "pipelines" / "lm_linux_doc.yaml")
TRACKING: str | None = None  # one MLflow store for all runs (the driver sets it): one schema migration
SMALL = [
    "source.seq_len=64", "source.eval_limit=128",
    "model.width=64", "model.layers=2", "model.heads=2", "model.dropout=0.1",
    "optimizer.lr=0.003", "schedule.name=constant", "schedule.warmup_epochs=0.002",
    "train.max_epochs=1", "train.checkpoint_every=0", "train.log_every_s=0", "train.stall_timeout_s=600",
    "scaling.local_mode=true", "audit.enabled=false",
]


@dataclass(frozen=True)
class Corpus:
    """The training split as the runs see it (from one index of the scaled pipeline)."""

    sequences: int  # packed training sequences (one epoch)
    seq_len: int  # predicted tokens per sequence
    pieces: int  # store requests of one epoch of the read plan (a piece per document range)
    documents: int
    bytes: int

    @property
    def tokens(self) -> int:
        return self.sequences * self.seq_len

    @property
    def requests_per_sequence(self) -> float:
        return self.pieces / self.sequences

    @property
    def bytes_per_sequence(self) -> float:
        return self.bytes / self.sequences


def corpus(extra: list[str]) -> Corpus:
    """Indexes the scaled pipeline once (bytes tokenizer: about a second)."""
    from echoray.config_load import load_config
    from echoray.data.sources import index_source

    cfg = load_config(PIPELINE, [*SMALL, *extra])
    idx = index_source(cfg.source)
    st = idx.details["stats"]["train"]
    return Corpus(sequences=st["sequences"], seq_len=idx.details["seq_len"],
                  pieces=sum(len(u) for u in idx.details["train_units"]), documents=st["documents"],
                  bytes=st["bytes"])


def evals_for(c: Corpus, batch: int, budget_seqs: int, evals_in_budget: int) -> int:
    """train.evals_per_epoch that puts about `evals_in_budget` evaluations into a budget
    of `budget_seqs` fresh sequences, at most one per step of an epoch at e = 1."""
    steps = max(1, c.sequences // batch)
    return max(1, min(steps, math.ceil(evals_in_budget * c.sequences / max(budget_seqs, 1))))


def run(overrides: list[str], name: str) -> dict:
    """One in-process `echoray train` of the scaled pipeline: its summary.json."""
    common.PIPELINE = PIPELINE
    shared = [f"tracking.uri={TRACKING}"] if TRACKING else []
    summary, _ = common.train_in_process([*shared, *SMALL, *overrides], name)
    return summary



def spread(values: list[float | None]) -> dict:
    """mean, min, max and n of the values that are not None."""
    v = [x for x in values if x is not None]
    return {"n": len(v), "mean": statistics.fmean(v) if v else None, "min": min(v, default=None),
            "max": max(v, default=None)}
