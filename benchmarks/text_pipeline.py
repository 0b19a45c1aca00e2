"""The text input pipeline against a plain torch DataLoader on the same cores
(benchmarks/lm.py --part pipeline), and the tokenizers' own speed per thread.

- compare: sequences/s delivered to the consumer, in batches of train.batch_size, by
  (a) `echoray bench-input` of the LM pipeline: the Ray Data pipeline a run trains from
  (read plan -> 2 preprocessing actors of 1 CPU: read, decode, tokenize, pack -> the
  worker-side batching with its local shuffle buffer), in this process on one local Ray;
  (b) a torch DataLoader with 2 worker processes over an IterableDataset that reads,
  decodes, tokenizes and packs the same read units (data/text/source.py TextReader, so
  the same tokenizer and the very same sequences), each epoch's units in a seeded
  order, rows batched by the default collate (no shuffle buffer: what a plain
  DataLoader does; echoray's buffer is work the DataLoader arm is spared), in a
  subprocess so that no Ray thread is forked. Both arms index the same corpus with the
  same tokenizer (BPE: trained once here, both load its tokenizer.json); both are rated
  as bench-input rates (the second half of --pipe-seconds after the first batch,
  bench_input.steady_rate). Arms interleave, their order rotating per repeat, and every
  run records the 1-min load when it started, once the previous arm's load has settled
  (common.settled_load). Goal (issue 23): echoray / DataLoader >= 1.1.
- tokenizer: MB/s and tokens/s of one thread (RAYON_NUM_THREADS=1) on the corpus's first
  units, against Hugging Face tokenizers' published 2-4 MB/s per thread (ANCHORS.md:
  tokenizers issues 1582, 1584).

-> results/text_pipeline.json. Standalone: python benchmarks/text_pipeline.py --dataloader-arm
YAML INDEX_PICKLE SECONDS WORKERS is the DataLoader arm alone (prints one JSON line).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

CORPUS = "/usr/share/doc/linux-doc-6.1/Documentation"


def pipeline_overrides(a, tokenizer: dict) -> list[str]:
    tok = "{" + ", ".join(f"{k}: {v}" for k, v in tokenizer.items()) + "}"
    return ["source.seq_len=64", f"source.path={a.pipe_path}", "source.text_suffixes=[.rst, .txt]",
            f"source.tokenizer={tok}", "preprocess.actors={min_size: 2, max_size: 2, num_cpus: 1.0}",
            "preprocess.batch_size=2", f"train.batch_size={a.pipe_batch}", "train.max_epochs=50",
            "echo.shuffle_buffer=2048", "train.log_every_s=0"]


def prepare(a, tokenizer: dict, work: Path) -> tuple[Path, object, Path]:
    """The LM pipeline at this benchmark's scale as a YAML file, its index (made once: a BPE
    is trained here and saved beside it, so both arms use the same one), and that index
    pickled for the subprocesses."""
    import pickle

    from lm_common import PIPELINE

    from echoray.config_load import load_config, to_yaml
    from echoray.data.sources import index_source

    cfg = load_config(PIPELINE, pipeline_overrides(a, tokenizer))
    idx = index_source(cfg.source)
    if tokenizer["kind"] == "bpe":
        tok_path = work / "tokenizer.json"
        tok_path.write_text(idx.details["tokenizer"]["json"])
        cfg = load_config(PIPELINE, pipeline_overrides(a, {**tokenizer, "path": str(tok_path)}))
    path = work / f"text_pipeline_{tokenizer['kind']}.yaml"
    path.write_text(to_yaml(cfg))
    pickled = work / f"text_pipeline_{tokenizer['kind']}.index.pkl"
    pickled.write_bytes(pickle.dumps(idx))
    return path, idx, pickled


def unit_order(n_units: int, seed: int, epoch: int) -> np.ndarray:
    return np.random.default_rng([seed, epoch]).permutation(n_units)


def dataloader_arm(yaml_path: str, index_path: str, seconds: float, workers: int) -> dict:
    """The DataLoader arm (run in its own process): sequences/s as bench-input rates them."""
    import pickle

    import torch
    import torch.utils.data as tud

    from echoray.bench_input import after_first_rate, steady_rate
    from echoray.config_load import load_config
    from echoray.data.text.source import TextReader

    class PackedUnits(tud.IterableDataset):
        """Every epoch's units in a seeded order; each worker reads, tokenizes and packs its share."""

        def __init__(self, idx, seed: int, epochs: int):
            self.idx, self.seed, self.epochs = idx, seed, epochs

        def __iter__(self):
            info = tud.get_worker_info()
            reader = TextReader(self.idx)
            n = len(self.idx.details["train_units"])
            for epoch in range(self.epochs):
                order = unit_order(n, self.seed, epoch)
                mine = order if info is None else order[info.id :: info.num_workers]
                for u in mine:
                    for row in reader.unit_rows("train", int(u)):
                        yield torch.from_numpy(row.astype(np.int64))

    torch.set_num_threads(1)
    cfg = load_config(yaml_path)
    idx = pickle.loads(Path(index_path).read_bytes())
    loader = tud.DataLoader(PackedUnits(idx, cfg.seed, cfg.train.max_epochs), batch_size=cfg.train.batch_size,
                            num_workers=workers, drop_last=True)
    t0 = time.perf_counter()
    marks, n = [], 0
    for batch in loader:
        assert batch.shape == (cfg.train.batch_size, cfg.source.seq_len + 1)
        n += len(batch)
        marks.append((time.perf_counter(), n))
        if marks[-1][0] - marks[0][0] >= seconds:
            break
    return {"examples_per_s": steady_rate(marks), "after_first_batch_examples_per_s": after_first_rate(marks),
            "first_batch_s": marks[0][0] - t0, "batches": len(marks), "workers": workers}


def echoray_arm(yaml_path: Path, idx, seconds: float) -> dict:
    from echoray.bench_input import bench_input
    from echoray.config_load import load_config

    r = bench_input(load_config(yaml_path), seconds, idx=idx)
    return {k: r[k] for k in ("examples_per_s", "delivered_examples_per_s", "produced_examples_per_s",
                              "after_first_batch_examples_per_s", "first_batch_s", "batches", "actors", "cpus")}


def compare(a, yaml_path: Path, idx, index_path: Path) -> dict:
    import common

    runs = {"dataloader": [], "echoray": []}
    names = list(runs)
    for rep in range(a.pipe_repeats):
        for what in names[rep % 2:] + names[: rep % 2]:  # rotate: drift hits both arms
            # settled: the previous arm's own 2 busy cores (and the BPE's Rust threads) have
            # left the 1-min load, so what is recorded is other work (the last file read 3.2-3.7
            # at its BPE runs' starts with nothing else running)
            load = common.settled_load()[0]
            if what == "dataloader":
                out = subprocess.run([sys.executable, __file__, "--dataloader-arm", str(yaml_path),
                                      str(index_path), str(a.pipe_seconds), str(a.pipe_workers)],
                                     capture_output=True, text=True, check=True, env=child_env())
                r = json.loads(out.stdout.strip().splitlines()[-1])
            else:
                r = echoray_arm(yaml_path, idx, a.pipe_seconds)
            r["load_avg_1m"] = load
            runs[what].append(r)
            print(f"pipeline {yaml_path.stem} {what}: {r['examples_per_s'] or 0:,.0f} sequences/s (load {load:.2f})",
                  flush=True)
    ratios = [e["examples_per_s"] / d["examples_per_s"] for e, d in zip(runs["echoray"], runs["dataloader"], strict=True)
              if e["examples_per_s"] and d["examples_per_s"]]
    return {"runs": runs, "echoray_vs_dataloader": {"per_repeat": ratios,
                                                    "median": float(np.median(ratios)) if ratios else None,
                                                    "goal": 1.1}}


def child_env() -> dict:
    env = dict(os.environ)
    here = Path(__file__).resolve().parent
    env["PYTHONPATH"] = os.pathsep.join([str(here.parent / "platform"), str(here), *filter(None, [env.get("PYTHONPATH")])])
    return env


def tokenizer_rate(index_path: Path, max_units: int) -> dict:
    """One thread (RAYON_NUM_THREADS=1, set in a fresh process) over the first units."""
    code = ("import json, pickle, sys, time; from pathlib import Path; "
            "from echoray.data.text.source import TextReader; "
            "idx = pickle.loads(Path(sys.argv[1]).read_bytes()); r = TextReader(idx); "
            "n = min(int(sys.argv[2]), len(idx.details['train_units'])); "
            "texts = [t for u in range(n) for t in r.texts('train', u)[0]]; b = sum(len(t.encode()) for t in texts); "
            "t0 = time.perf_counter(); k = sum(len(i) for i in r.tokenizer.encode(texts)); s = time.perf_counter() - t0; "
            "print(json.dumps({'MB_per_s': b / s / 1e6, 'tokens_per_s': k / s, 'bytes': b, 'tokens': k, "
            "'bytes_per_token': b / k}))")
    out = subprocess.run([sys.executable, "-c", code, str(index_path), str(max_units)], capture_output=True, text=True,
                         check=True, env={**child_env(), "RAYON_NUM_THREADS": "1"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def part(a, results: Path, scale: dict) -> list[str]:
    import common

    work = Path(a.work) / "pipeline"
    work.mkdir(parents=True, exist_ok=True)
    out = {"path": a.pipe_path, "seq_len": 64, "published_hf_MB_per_s": [2, 4], "scale": scale}
    for kind in a.pipe_tokenizers:
        tok = {"kind": "bytes"} if kind == "bytes" else {"kind": "bpe", "vocab_size": a.pipe_vocab}
        t0 = time.perf_counter()
        yaml_path, idx, index_path = prepare(a, tok, work)
        res = {"index_s": time.perf_counter() - t0, "train_sequences": len(idx.train_ids),
               "tokenizer": tokenizer_rate(index_path, a.pipe_token_units), **compare(a, yaml_path, idx, index_path)}
        out[kind] = res
        print(f"pipeline {kind}: tokenizer {res['tokenizer']['MB_per_s']:.2f} MB/s/thread; echoray / DataLoader "
              f"{res['echoray_vs_dataloader']['median']}", flush=True)
    common.save(a.pipe_name, out, a, path=results / f"{a.pipe_name}.json", repeats=a.pipe_repeats,
                end_load=common.settled_load())
    return [a.pipe_name]


if __name__ == "__main__" and sys.argv[1:2] == ["--dataloader-arm"]:
    print(json.dumps(dataloader_arm(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))), flush=True)
elif __name__ == "__main__":
    raise SystemExit("run it as benchmarks/lm.py --part pipeline (python benchmarks/lm.py --help)")
