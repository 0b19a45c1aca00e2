"""The torch DataLoader arm of benchmarks/accelerator.py: the same emulated accelerator
(accelerator_model.py, form "wait") fed by what a PyTorch user writes, with echoray's own
decoder (data/full_crop.py: the random-resized crop 224 and the flip made at decode) so the
two arms differ only in how the work reaches the step: a Dataset of the folder's JPEGs,
`workers` DataLoader processes, uint8 batches normalised in the training loop, no echo.

    python benchmarks/accelerator_dataloader.py ROOT US_PER_SAMPLE EPOCHS BUSY_LOG [--workers 2] [--queue-steps 1]

Runs in its own process (benchmarks/accelerator.py starts it; no Ray in it) and prints one
JSON line: examples, wall seconds, first-batch seconds. The busy fraction is read from
BUSY_LOG like the Ray arms'.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from accelerator_model import factory

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class JpegCrops(torch.utils.data.Dataset):
    """(crop 224 x 224 x 3 uint8, class) per file; one augmentation key per (epoch, index)."""

    def __init__(self, root: str, seed: int = 0):
        self.files = sorted(Path(root).rglob("*.JPEG"))
        classes = sorted({f.parent.name for f in self.files})
        self.labels = [classes.index(f.parent.name) for f in self.files]
        self.seed, self.epoch = seed, 0

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        from echoray.config import AugmentOp
        from echoray.data.full_crop import crop_decoder
        from echoray.seeds import mix

        keys = mix(self.seed, self.epoch, np.array([i]))
        dec = crop_decoder(keys, AugmentOp(op="random_resized_crop", size=224), 3, AugmentOp(op="flip"))
        return torch.from_numpy(dec(0, self.files[i].read_bytes(), str(self.files[i]))), self.labels[i]


def run(root: str, us_per_sample: float, epochs: int, busy_log: str, workers: int = 2, batch: int = 64,
        queue_steps: int = 0) -> dict:
    torch.set_num_threads(1)
    data = JpegCrops(root)
    loader = torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True, num_workers=workers,
                                         drop_last=True, persistent_workers=False)
    model = factory(num_classes=len(set(data.labels)), input_shape=(3, 224, 224), us_per_sample=us_per_sample,
                    busy_log=busy_log, queue_steps=queue_steps)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    mean, std = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
    t0, first, n = time.perf_counter(), None, 0
    for epoch in range(epochs):
        data.epoch = epoch  # read by the workers a new epoch's iterator starts
        for x, y in loader:
            first = first if first is not None else time.perf_counter() - t0
            x = (x.permute(0, 3, 1, 2).float().div_(255.0) - mean) / std
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            n += len(y)
    return {"examples": n, "wall_s": time.perf_counter() - t0, "first_batch_s": first, "loader_workers": workers}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("us_per_sample", type=float)
    ap.add_argument("epochs", type=int)
    ap.add_argument("busy_log")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--queue-steps", type=int, default=0)
    args = ap.parse_args()
    print(json.dumps(run(args.root, args.us_per_sample, args.epochs, args.busy_log, args.workers,
                         queue_steps=args.queue_steps)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
