"""The language-model measurements of issue 23, one driver: five parts, each in its own
module, every one training the small byte-level LM of benchmarks/lm_common.py (the Linux
admin guide from Debian's linux-doc-6.1) in process on one local Ray.

- figure5 (lm_echo_figure5.py): data echoing's Figure 5: fresh tokens to a held-out
  bits-per-byte target against e = 1, 2, 4, 8, 16 (batch echo) at two batch sizes, 3
  seeds each, with the 1/e line; states at which e a repeated token stops being worth
  half a fresh one, and which e needs the fewest fresh tokens.
  -> results/lm_echo_figure5.json, lm_echo_figure5.png
- auto (lm_auto_echo.py): time to target with echo.factor auto on an emulated remote
  store at R ~ 5, against e = 1 and the fixed factors (goals: >= 3.5x faster than e = 1,
  within 10% of the best fixed factor). -> results/lm_auto_echo.json
- ba (lm_ba.py): dropout batch augmentation, M = 1, 2, 4 at fixed steps, 3 seeds: held-out
  bits per byte. -> results/lm_ba.json
- pipeline (text_pipeline.py): the Ray Data text pipeline against a plain torch DataLoader
  that reads, tokenizes and packs the same units on the same 2 cores (goal >= 1.1x), bytes
  and BPE; tokenizer MB/s per thread. -> results/text_pipeline.json
- index (lm_index.py): indexing the whole 24 MB Documentation tree with a BPE (the
  tokenizer's training and the sequence count of every read unit), per phase.
  -> results/lm_index.json

Every results file is written by common.save (the load average at the part's start and
end, the commit, the command, the seeds) and carries the part's scale (every knob below).
The default scale takes about 37 minutes on 2 otherwise idle cores (measured: figure5
20.2, auto 7.8 with 5 seeds, ba 4.1, pipeline 4.0, index 0.6); a
loaded machine takes longer. Each --knob scales its part.
--smoke: a tiny scale whose results go to a temporary folder (never benchmarks/results):
proves every part runs end to end, in about 5 minutes.

    .venv/bin/python benchmarks/lm.py                         # all parts
    .venv/bin/python benchmarks/lm.py --part figure5 --f5-seeds 0 1 2
    .venv/bin/python benchmarks/lm.py --part auto --auto-seeds 0 1
    .venv/bin/python benchmarks/lm.py --smoke
"""

from __future__ import annotations

import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")  # the index's BPE encodes in Rust threads

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import common  # noqa: E402 - first: it records the load at the start
from common import RESULTS  # noqa: E402

BENCH = Path(__file__).resolve().parent
CORPUS = "/usr/share/doc/linux-doc-6.1/Documentation"

# knob: (default, smoke, element type, a list?). The defaults fit about 37 minutes on 2
# idle cores; the smoke scale about 5.
SCALE = {
    "f5_factors": ([1, 2, 4, 8, 16], [1, 4], float, True),
    "f5_batch_sizes": ([16, 64], [16], int, True),
    "f5_seeds": ([0, 1, 2], [0], int, True),
    # bits per byte, or pilot: e = 1 of seed 100 per batch size at 70% of its budget (lm_echo_figure5.py)
    "f5_target": ("pilot", "pilot", str, False),
    # e = 1 reads the whole budget: at 400,000 tokens it did not reach 4.0 bits per byte at
    # either batch size (best 4.05-4.10, 3 seeds each), so nothing could be compared to it
    "f5_budget_tokens": (1_000_000, 100_000, int, False),
    "f5_evals": (40, 10, int, False),  # evaluations in the full budget (fewer in a smaller one)
    "f5_trained_cap": (2.5, 4.0, float, False),  # a run trains at most this x f5_budget_tokens
    "f5_stage": ("batch", "batch", str, False),
    "f5_worth": (0.5, 0.5, float, False),
    "f5_name": ("lm_echo_figure5", "lm_echo_figure5", str, False),  # the output files' name (.json, .png)
    "auto_r": (5.0, 5.0, float, False),
    "auto_factors": (["1", "2", "4", "8", "auto"], ["1", "4", "auto"], str, True),
    # 5 seeds: e = 1's time to target ranged 23.8-53.1 s over seeds 0-4 with one store
    "auto_seeds": ([0, 1, 2, 3, 4], [0], int, True),
    # bits per byte, or pilot: the probe's (e = 1, seed 100, the whole budget) at 70% of its
    # evaluations (benchmarks/ttt.py); 4.2 sat on the plateau, 4.4 on the byte-entropy shelf
    "auto_target": ("pilot", "pilot", str, False),
    "auto_budget_tokens": (400_000, 100_000, int, False),
    "auto_batch": (16, 16, int, False),
    "auto_evals": (30, 10, int, False),
    "auto_probe_ms": (1.0, 1.0, float, False),
    # the emulated store's charge: per byte (a stable rate) or per request (a document)
    "auto_store": ("bandwidth", "bandwidth", str, False),
    "auto_name": ("lm_auto_echo", "lm_auto_echo", str, False),  # the output JSON's name (another target: another name)
    # plain: the corpus unpacked once, read in 4 KB ranges; gz: a read unit is a document
    "auto_corpus": ("plain", "plain", str, False),
    "auto_check": (3200, 800, int, False),  # fresh sequences of the calibration's check run
    "auto_shuffle": (256, 256, int, False),
    "ba_copies": ([1, 2, 4], [1, 2], int, True),
    "ba_seeds": ([0, 1, 2], [0], int, True),
    "ba_batch": (16, 16, int, False),
    "ba_budget_tokens": (200_000, 40_000, int, False),
    "ba_evals": (2, 1, int, False),
    "ba_eval_limit": (1024, 128, int, False),
    "ba_name": ("lm_ba", "lm_ba", str, False),  # the output JSON's name
    "pipe_path": (CORPUS, CORPUS + "/admin-guide", str, False),
    "pipe_tokenizers": (["bytes", "bpe"], ["bytes", "bpe"], str, True),
    "pipe_vocab": (4096, 1024, int, False),
    "pipe_batch": (64, 64, int, False),
    "pipe_seconds": (20.0, 12.0, float, False),  # smoke: a BPE actor needs ~3 s to its first batch
    "pipe_repeats": (2, 1, int, False),
    "pipe_workers": (2, 2, int, False),
    "pipe_name": ("text_pipeline", "text_pipeline", str, False),  # the output JSON's name
    "pipe_token_units": (400, 50, int, False),
    "index_path": (CORPUS, CORPUS + "/admin-guide", str, False),
    "index_vocab": (4096, 1024, int, False),
    "index_repeats": (2, 1, int, False),
    "index_platform": (None, None, str, False),  # another checkout's platform/ to time beside this one
}


def parts() -> dict:
    import lm_auto_echo
    import lm_ba
    import lm_echo_figure5
    import lm_index
    import text_pipeline

    return {"figure5": lm_echo_figure5.part, "auto": lm_auto_echo.part, "ba": lm_ba.part,
            "pipeline": text_pipeline.part, "index": lm_index.part}


PART_NAMES = ("figure5", "auto", "ba", "pipeline", "index")
NEEDS_RAY = ("figure5", "auto", "ba", "pipeline")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", nargs="+", default=["all"], choices=["all", *PART_NAMES])
    ap.add_argument("--smoke", action="store_true", help="tiny scale, its files to a temporary folder")
    ap.add_argument("--work", default=None, help="scratch folder (default: a temporary folder)")
    ap.add_argument("--set", action="append", default=[], help="key=value for every LM run (figure5, auto, ba)")
    for key, (_, _, typ, many) in SCALE.items():
        ap.add_argument("--" + key.replace("_", "-"), dest=key, type=typ, nargs="+" if many else None, default=None)
    a = ap.parse_args(argv)
    for key, (default, smoke, _, _) in SCALE.items():
        if getattr(a, key) is None:
            setattr(a, key, smoke if a.smoke else default)
    a.part = list(PART_NAMES) if "all" in a.part else a.part
    return a


def main() -> None:
    a = parse()
    a.work = a.work or tempfile.mkdtemp(prefix="lm-bench-")
    Path(a.work).mkdir(parents=True, exist_ok=True)  # --work may name a folder to make (its MLflow store)
    out_dir = Path(a.work) / "out" if a.smoke else RESULTS
    import lm_common

    lm_common.TRACKING = f"sqlite:///{Path(a.work).resolve()}/mlflow.db"
    if any(p in NEEDS_RAY for p in a.part):
        from echoray.runtime.session import start_ray

        start_ray()
    run = parts()
    for name in a.part:
        # each part's file records the load at its own start, once the previous part's
        # runs have wound down (common.settled_load), not the process's start
        common.START_LOAD = common.settled_load()
        load0, t0 = common.START_LOAD, time.time()
        scale = {"part": name, "smoke": a.smoke, "argv": sys.argv,
                 **{k: getattr(a, k) for k in SCALE if k.startswith(prefix(name))}}
        written = run[name](a, out_dir, scale)
        print(f"{name}: {(time.time() - t0) / 60:.1f} min, load {load0[0]:.2f} -> {os.getloadavg()[0]:.2f}; "
              f"wrote {', '.join(written)}", flush=True)
    print(f"files in {out_dir}, scratch in {a.work}")


def prefix(part: str) -> str:
    return {"figure5": "f5_", "auto": "auto_", "ba": "ba_", "pipeline": "pipe_", "index": "index_"}[part]


if __name__ == "__main__":
    main()
