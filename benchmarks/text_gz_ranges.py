"""One large `.gz` corpus file, read whole (before) against cut into ranges (after).

Issue 23 asks that a text source work for one large file as well as for thousands of
small ones, several actors sharing one 40 MB file. Plain files were cut into line
ranges; a `.gz` file was one read unit (gzip cannot be entered mid-stream), so one
actor call read, tokenized and packed all of it and its sequences reached the consumer
only when that call ended. Since this change the planner reads a large `.gz` once
and cuts it where its plain text would be cut, with an `indexed_gzip` access-point
index so each range starts near its first byte (data/text/corpus.py `gz_indexed`).

The corpus: every `.rst.gz` document of Debian's linux-doc-6.1 Documentation tree
(translations left out), decompressed and concatenated into one `documentation.txt.gz`
(gzip level 6) in --work, made once; held out: 20 of the admin guide's documents as
plain text beside it (source.eval_path). Each arm runs `echoray bench-input` on
pipelines/lm_linux_doc.yaml (seq_len 128; --tokenizer, by default a 4,096-symbol BPE, each
arm training its own, seeded, on the same sample) with 2 actors of 1 CPU and
read units derived from the corpus (data/text/source.py unit_bytes; 1 MiB before issue 59), for --seconds after its first batch, in a
subprocess with that commit's platform/ first on PYTHONPATH (--before: a git worktree
under --work). The arms alternate, --repeats times. Recorded per run: the index's time
and read units, the first batch, the steady rate (bench_input's: the lower of the rate
batches arrived at and the pool's) and the largest resident memory of an actor.

    .venv/bin/python benchmarks/text_gz_ranges.py [--before 0cca3da] [--repeats 2]
        [--seconds 20] [--tokenizer "{kind: bytes}"] [--work /tmp/echoray-gz-ranges] [--name text_gz_ranges]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent  # not common's: it puts this tree's platform/ first on sys.path
DOCS = Path("/usr/share/doc/linux-doc-6.1/Documentation")
PIPELINE = REPO / "pipelines" / "lm_linux_doc.yaml"


def make_corpus(work: Path) -> tuple[Path, Path, dict]:
    """work/big/documentation.txt.gz and work/eval/*.txt, made once."""
    big, held = work / "big", work / "eval"
    target = big / "documentation.txt.gz"
    paths = sorted(p for p in DOCS.rglob("*.rst.gz") if "translations" not in p.parts)
    if not target.exists():
        big.mkdir(parents=True, exist_ok=True)
        text = b"".join(gzip.decompress(p.read_bytes()) for p in paths)
        target.with_suffix(".tmp").write_bytes(gzip.compress(text, compresslevel=6))
        target.with_suffix(".tmp").rename(target)
    if not held.is_dir():
        held.mkdir(parents=True)
        for p in sorted((DOCS / "admin-guide").glob("*.rst.gz"))[:20]:
            (held / (p.name[: -len(".rst.gz")] + ".txt")).write_bytes(gzip.decompress(p.read_bytes()))
    return big, held, {"documents": len(paths), "stored_bytes": target.stat().st_size}


class PeakActorMemory:
    """The largest resident memory of any preprocessing actor (ray::MapWorker), sampled."""

    def __init__(self, every_s: float = 0.1):
        import threading

        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every_s,), daemon=True)
        self._thread.start()

    def _run(self, every_s: float) -> None:
        import psutil

        while not self._stop.wait(every_s):
            for p in psutil.process_iter(["cmdline", "memory_info"]):
                cmd = " ".join(p.info["cmdline"] or [])
                if cmd.startswith("ray::MapWorker") and p.info["memory_info"]:
                    self.peak = max(self.peak, p.info["memory_info"].rss)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def arm(big: str, held: str, seconds: float, tokenizer: str) -> dict:
    """One bench-input run with the echoray on sys.path (the arm's platform/)."""
    from echoray.bench_input import bench_input
    from echoray.config_load import load_config
    from echoray.data.sources import index_source

    cfg = load_config(PIPELINE, [f"source.path={big}", f"source.eval_path={held}", "source.text_suffixes=[.txt]",
                                 "source.text_exclude=[]", f"source.tokenizer={tokenizer}",
                                 "preprocess.actors={min_size: 2, max_size: 2, num_cpus: 1.0}"])
    t0 = time.perf_counter()
    idx = index_source(cfg.source)
    index_s = time.perf_counter() - t0
    memory = PeakActorMemory()
    try:
        r = bench_input(cfg, seconds, idx=idx)
    finally:
        peak = memory.stop()
    return {"index_s": round(index_s, 2), "train_units": len(idx.details["train_units"]),
            "train_sequences": len(idx.train_ids), "first_batch_s": r["first_batch_s"],
            "examples_per_s": r["examples_per_s"], "after_first_batch_examples_per_s": r["after_first_batch_examples_per_s"],
            "examples": r["marks"][-1][1], "wall_s": r["wall_s"], "actor_peak_rss_mb": round(peak / 2**20)}


def run_arm(platform_dir: Path, big: Path, held: Path, seconds: float, tokenizer: str) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{platform_dir}{os.pathsep}{REPO / 'benchmarks'}"}
    out = subprocess.run([sys.executable, __file__, "--arm", str(big), str(held), str(seconds), tokenizer], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def worktree(commit: str, work: Path) -> Path:
    path = work / f"tree-{commit}"
    if not (path / "platform").is_dir():
        subprocess.run(["git", "worktree", "add", "--detach", str(path), commit], cwd=REPO, check=True,
                       capture_output=True)
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", default="0cca3da")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--work", type=Path, default=Path("/tmp/echoray-gz-ranges"))
    p.add_argument("--name", default="text_gz_ranges")
    p.add_argument("--tokenizer", default="{kind: bpe, vocab_size: 4096}")
    p.add_argument("--arm", nargs=4, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.arm:  # with the arm's platform/ on PYTHONPATH
        print(json.dumps(arm(a.arm[0], a.arm[1], float(a.arm[2]), a.arm[3])))
        return
    from common import save, settled_load
    big, held, corpus = make_corpus(a.work)
    trees = {"before": worktree(a.before, a.work) / "platform", "after": REPO / "platform"}
    runs: dict[str, list] = {"before": [], "after": []}
    for rep in range(a.repeats):
        for name in (("before", "after") if rep % 2 == 0 else ("after", "before")):
            load = settled_load()[0]
            r = {**run_arm(trees[name], big, held, a.seconds, a.tokenizer), "repeat": rep, "load_avg_1m_start": load}
            runs[name].append(r)
            print(name, json.dumps(r), flush=True)
    save(a.name, {"corpus": corpus, "before": a.before, "runs": runs}, a, seeds=[0], repeats=a.repeats)


if __name__ == "__main__":
    main()
