"""The text input pipeline per core: tokenizers alone, echoray's preprocessing actor, and a
torch DataLoader that reads, tokenizes and packs the same corpus.

Prints and saves benchmarks/results/text_pipeline.json:

- tokenizer: MB/s and tokens/s of one thread (RAYON_NUM_THREADS=1) for `bytes` and a
  byte-level BPE trained on the corpus, against Hugging Face tokenizers' published
  2-4 MB/s per thread (ANCHORS.md: tokenizers issues 1582, 1584);
- echoray: the preprocessing actor's code (data/stages.py Preprocess: read, decode,
  tokenize, pack, one epoch of the read plan) in this process, one core: sequences/s,
  tokens/s, MB/s;
- dataloader: torch.utils.data.DataLoader over an IterableDataset that does the same
  reads, decode, tokenization and packing of the same read units (workers 0 = this
  process, one core; --loader-workers N: N processes).

    .venv/bin/python benchmarks/text_pipeline.py [--path DIR] [--seq-len 128] [--vocab 4096]
        [--loader-workers 0 2] [--max-units N]

Run on a quiet machine: every figure is per core and load-sensitive.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # before tokenizers is imported: one thread

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from common import RESULTS  # noqa: E402

from echoray.config import SourceConfig  # noqa: E402
from echoray.data.sources import index_source  # noqa: E402
from echoray.data.text.source import TextReader  # noqa: E402

DEFAULT_PATH = "/usr/share/doc/linux-doc-6.1/Documentation"


def source_cfg(args, tokenizer: dict) -> SourceConfig:
    return SourceConfig(kind="text", path=args.path, text_suffixes=[".rst", ".txt"], text_exclude=["translations/*"],
                        seq_len=args.seq_len, range_bytes=args.range_bytes, tokenizer=tokenizer)


def tokenizer_rate(reader: TextReader, units: list[int]) -> dict:
    texts = [t for u in units for t in reader.texts("train", u)[0]]
    n_bytes = sum(len(t.encode()) for t in texts)
    t0 = time.perf_counter()
    n_tokens = sum(len(ids) for ids in reader.tokenizer.encode(texts))
    s = time.perf_counter() - t0
    return {"MB_per_s": n_bytes / s / 1e6, "tokens_per_s": n_tokens / s, "bytes": n_bytes, "tokens": n_tokens,
            "bytes_per_token": n_bytes / n_tokens}


def echoray_rate(idx, units: list[int]) -> dict:
    from echoray.config import RemoteEmulation
    from echoray.data.stages import Preprocess

    stage = Preprocess(idx, 1, RemoteEmulation(), [], 0, "none", 1.0)
    t0 = time.perf_counter()
    rows = 0
    for s in range(0, len(units), 2):  # preprocess.batch_size 2: two units per call, as lm_linux_doc.yaml
        batch = {"epoch": np.zeros(len(units[s : s + 2]), np.int64), "chunk": np.asarray(units[s : s + 2])}
        for out in stage(batch):
            rows += len(out["sample_id"])
    s = time.perf_counter() - t0
    return rate(rows, idx.details["seq_len"], stage.reader.bytes_read, s)


def rate(rows: int, seq_len: int, n_bytes: int, s: float) -> dict:
    return {"sequences_per_s": rows / s, "tokens_per_s": rows * (seq_len + 1) / s, "MB_per_s": n_bytes / s / 1e6,
            "sequences": rows, "seconds": s}


import torch.utils.data as tud  # noqa: E402


class PackedUnits(tud.IterableDataset):
    """An IterableDataset of the same units: each worker reads, tokenizes and packs its share."""

    def __init__(self, idx, units: list[int]):
        self.idx, self.units = idx, units

    def __iter__(self):
        info = tud.get_worker_info()
        mine = self.units if info is None else self.units[info.id :: info.num_workers]
        reader = TextReader(self.idx)
        for u in mine:
            yield from reader.unit_rows("train", u)


def dataloader_rate(idx, units: list[int], workers: int, n_bytes: int) -> dict:
    import torch

    torch.set_num_threads(1)
    loader = tud.DataLoader(PackedUnits(idx, units), batch_size=64, num_workers=workers)
    t0 = time.perf_counter()
    rows = sum(len(b) for b in loader)
    return {**rate(rows, idx.details["seq_len"], n_bytes, time.perf_counter() - t0), "workers": workers}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--path", default=DEFAULT_PATH)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--range-bytes", type=int, default=32768)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--loader-workers", type=int, nargs="+", default=[0, 2])
    ap.add_argument("--max-units", type=int, default=None, help="read only the first N units (smoke test)")
    ap.add_argument("--out", default=str(RESULTS / "text_pipeline.json"))
    args = ap.parse_args()
    out = {"path": args.path, "seq_len": args.seq_len, "load_before": os.getloadavg(), "published_hf_MB_per_s": [2, 4]}
    for name, tok in (("bytes", {"kind": "bytes"}), ("bpe", {"kind": "bpe", "vocab_size": args.vocab})):
        t0 = time.perf_counter()
        idx = index_source(source_cfg(args, tok))
        units = list(range(len(idx.details["train_units"])))[: args.max_units]
        reader = TextReader(idx)
        res = {"index_s": time.perf_counter() - t0, "units": len(units),
               "tokenizer": tokenizer_rate(reader, units), "echoray": echoray_rate(idx, units)}
        n_bytes = res["tokenizer"]["bytes"]
        res["dataloader"] = [dataloader_rate(idx, units, w, n_bytes) for w in args.loader_workers]
        out[name] = res
        print(f"{name}: tokenizer {res['tokenizer']['MB_per_s']:.2f} MB/s/thread, "
              f"echoray actor {res['echoray']['tokens_per_s']:,.0f} tokens/s/core, DataLoader "
              + ", ".join(f"{d['workers']}w {d['tokens_per_s']:,.0f}" for d in res["dataloader"]) + " tokens/s",
              flush=True)
    out["load_after"] = os.getloadavg()
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
