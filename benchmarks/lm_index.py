"""How long a text run's index takes (benchmarks/lm.py --part index): the whole 24 MB
Documentation tree of linux-doc-6.1 (translations left out) with a byte-level BPE, and
with the bytes tokenizer, each repeat in a fresh process (nothing cached), timed around
`index_source` and per phase as the index records them (details["stats"]["index_s"]:
listing, tokenizer training, counting the sequences of every read unit).

--index-platform DIR times another checkout's platform/ folder the same way (an older
commit: the before of a change; its index may record no phases).

-> results/lm_index.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CODE = """
import json, sys, time
from echoray.config import SourceConfig
from echoray.data.sources import index_source
cfg = SourceConfig(kind="text", path=sys.argv[1], text_suffixes=[".rst", ".txt"], text_exclude=["translations/*"],
                   seq_len=64, tokenizer=json.loads(sys.argv[2]))
t0 = time.perf_counter()
idx = index_source(cfg)
s = time.perf_counter() - t0
st = idx.details["stats"]
print(json.dumps({"index_s": s, "phases_s": st.get("index_s"), "train": st["train"], "eval": st["eval"]}))
"""


def timed(platform_dir: Path, path: str, tokenizer: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(platform_dir)}
    load = os.getloadavg()[0]
    out = subprocess.run([sys.executable, "-c", CODE, path, json.dumps(tokenizer)], capture_output=True, text=True,
                         check=True, env=env)
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "load_avg_1m": load}


def part(a, results: Path, scale: dict) -> list[str]:
    from common import REPO, save

    platforms = {"this": REPO / "platform"}
    if getattr(a, "index_platform", None):
        platforms["other"] = Path(a.index_platform)
    out = {"path": a.index_path, "platforms": {k: str(v) for k, v in platforms.items()}, "scale": scale, "runs": []}
    for rep in range(a.index_repeats):
        for tok in ({"kind": "bpe", "vocab_size": a.index_vocab}, {"kind": "bytes"}):
            for name, where in platforms.items():  # interleaved: drift hits both alike
                r = {"platform": name, "tokenizer": tok["kind"], "repeat": rep, **timed(where, a.index_path, tok)}
                out["runs"].append(r)
                print(f"index {name} {tok['kind']}: {r['index_s']:.1f} s (phases {r['phases_s']}, "
                      f"load {r['load_avg_1m']:.2f})", flush=True)
    save("lm_index", out, a, path=results / "lm_index.json", repeats=a.index_repeats)
    return ["lm_index"]
