"""A CPU training step in NCHW against NHWC (`train.channels_last`), by model width.

One thread (what a search trial or a one-CPU worker gets), `small_cnn` (train/models.py)
of each `--widths` on `--size`-pixel RGB crops, batches of `--batch`, SGD with momentum:
forward, loss, backward and step, timed after 10 warm-up steps, `--steps` steps a round,
`--rounds` rounds with the two layouts alternating. Reports milliseconds per example and
the NCHW / NHWC ratio (above 1: NHWC is faster) per width, the median of the rounds.

Which layout is faster depends on the model, so echoray leaves `train.channels_last`
off by default and a pipeline sets it where this says it pays.

    .venv/bin/python benchmarks/step_layout.py [--widths 2,4,8,16] [--size 64] [--batch 64] [--steps 60] [--rounds 3]

Writes benchmarks/results/step_layout.json through common.save (load at start and end).
"""

from __future__ import annotations

import argparse
import statistics
import time

import common  # noqa: F401 - first: it records the load at the benchmark's start
import torch
from common import save, settled_load

from echoray.train.device import memory_format
from echoray.train.models import SmallCNN


def ms_per_example(width: int, channels_last: bool, size: int, batch: int, steps: int) -> float:
    torch.manual_seed(0)
    fmt = memory_format(channels_last)
    model = SmallCNN(3, 4, width, 0.0).to(memory_format=fmt)
    x = torch.randn(batch, 3, size, size).contiguous(memory_format=fmt)
    y = torch.randint(0, 4, (batch,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for i in range(steps + 10):
        if i == 10:
            t0 = time.process_time()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return 1000 * (time.process_time() - t0) / (steps * batch)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--widths", default="2,4,8,16")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(1)
    widths = [int(w) for w in a.widths.split(",")]
    rounds: dict[int, dict[str, list[float]]] = {w: {"nchw": [], "nhwc": []} for w in widths}
    for r in range(a.rounds):
        for w in widths:
            for layout in (("nchw", "nhwc") if r % 2 == 0 else ("nhwc", "nchw")):
                rounds[w][layout].append(ms_per_example(w, layout == "nhwc", a.size, a.batch, a.steps))
    out = {}
    for w, by in rounds.items():
        nchw, nhwc = statistics.median(by["nchw"]), statistics.median(by["nhwc"])
        out[str(w)] = {"nchw_ms_per_example": nchw, "nhwc_ms_per_example": nhwc,
                       "nchw_over_nhwc": nchw / nhwc, "rounds": by}
        print(f"width {w}: NCHW {nchw:.3f} ms/example, NHWC {nhwc:.3f}: NHWC {nchw / nhwc:.2f}x", flush=True)
    print(save("step_layout", {"threads": 1, "size": a.size, "batch": a.batch, "widths": out}, a,
               end_load=settled_load()))


if __name__ == "__main__":
    main()
