"""Your own Ray Train program with echoray's building blocks (no echoray pipeline, no YAML).

A TorchTrainer runs the user's own train_loop_per_worker on 2 CPU workers; echoray supplies:
- echoray.data.repeat_epochs + echo_dataset: the run as one stream of (epoch, sample) rows,
  echoed by a fractional factor (seeded per sample) after the expensive part (here: making
  the images), then echo_batches: echoray's local shuffle buffer and its packer;
- echoray.train grouped batch augmentation: the 2 workers form one group of M = 2; the
  leader reads (GroupedDataConfig gives one shard per group) and group_batches sends its
  batches to the member; each member augments view v = its member index (view_keys) with
  echoray.data.augment_images, so the group trains M views of every sample, one per worker;
- echoray.train.FreshCounter: fresh examples, exact across workers.

    PYTHONPATH=platform python examples/ray_train_loop.py --out /tmp/loop

Each rank writes OUT/rank<r>.json (what it trained, row by row); the test suite checks them.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")

SIDE, CLASSES = 8, 4


def make_rows(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Generated data: class k has a bright 3x3 square in corner k, over seeded noise."""
    ids = batch["id"].astype(np.int64)
    labels = ids % CLASSES
    rng = np.random.default_rng(ids[0] if len(ids) else 0)
    images = rng.integers(0, 96, (len(ids), SIDE, SIDE, 1), dtype=np.uint8)
    for k in range(CLASSES):
        r, c = divmod(k, 2)
        images[labels == k, r * 5:r * 5 + 3, c * 5:c * 5 + 3] = 255
    return {"sample_id": ids, "label": labels, "image": images}


def train_loop(config: dict) -> None:
    import ray.train
    import torch
    from torch import nn

    import echoray.data as ed
    import echoray.train as et

    ctx = ray.train.get_context()
    rank, world, seed, copies = ctx.get_world_rank(), ctx.get_world_size(), config["seed"], config["copies"]
    layout = et.group_layout(rank, world, copies)
    pg = et.member_group(world, copies)
    torch.manual_seed(seed)  # the same initial weights on every rank
    model = ray.train.torch.prepare_model(nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(32, CLASSES)))
    torch.manual_seed(et.dropout_seed(seed, rank))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ops = [{"op": "flip", "p": 0.5}, {"op": "random_crop", "padding": 1}]

    source = None
    if layout.reads:
        source = ed.echo_batches(ray.train.get_dataset_shard("train"), config["batch_size"],
                                 shuffle_buffer=64, seed=et.sampling_seed(seed, layout.group))
    fresh, trained, losses = et.FreshCounter(), [], []
    for batch in et.group_batches(source, layout, pg):
        keys = et.view_keys(seed, batch, layout, per_copy=True)  # this member's view
        x = torch.from_numpy(ed.augment_images(batch["image"], keys, ops)).permute(0, 3, 1, 2).float() / 255
        loss = nn.functional.cross_entropy(model(x), torch.from_numpy(batch["label"]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if layout.reads:
            fresh.update(batch)
        trained += [[int(e), int(i), int(c), int(k)] for e, i, c, k in
                    zip(batch["epoch"], batch["sample_id"], batch["echo_copy"], keys, strict=True)]
    total = fresh.total()  # every rank, at the same point
    record = {"rank": rank, "group": layout.group, "member": layout.member, "reads": layout.reads,
              "fresh_local": fresh.local, "fresh_total": total, "steps": len(losses),
              "first_loss": losses[0], "last_loss": losses[-1], "rows": trained}
    Path(config["out"], f"rank{rank}.json").write_text(json.dumps(record))
    ray.train.report({"fresh_examples": total, "loss": losses[-1]})


def main(out: str, samples: int = 96, epochs: int = 2, factor: float = 1.5, batch_size: int = 16,
         seed: int = 0) -> list[dict]:
    """Train, and return every rank's record (OUT/rank<r>.json)."""
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    import echoray.data as ed
    import echoray.train as et

    Path(out).mkdir(parents=True, exist_ok=True)
    if not ray.is_initialized():  # a cluster's (RAY_ADDRESS, `ray job submit`), else a local one
        ray.init(**({} if os.environ.get("RAY_ADDRESS") else {"num_cpus": 2, "include_dashboard": False}))
    ray.data.DataContext.get_current().enable_progress_bars = False
    base = ray.data.range(samples).map_batches(make_rows, batch_format="numpy")
    stream = ed.echo_dataset(ed.repeat_epochs(base, epochs, seed=seed), factor, seed=seed)
    copies = 2
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={"seed": seed, "copies": copies, "batch_size": batch_size, "out": str(Path(out).resolve())},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False, resources_per_worker={"CPU": 0.5}),
        datasets={"train": stream},
        dataset_config=et.GroupedDataConfig(copies),
        run_config=RunConfig(name="loop", storage_path=tempfile.mkdtemp(prefix="echoray-loop-")),
    )
    trainer.fit()
    return [json.loads(p.read_text()) for p in sorted(Path(out).glob("rank*.json"))]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="loop-out")
    ap.add_argument("--samples", type=int, default=96)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--factor", type=float, default=1.5)
    args = ap.parse_args()
    for r in main(args.out, args.samples, args.epochs, args.factor):
        print(f"rank {r['rank']} (group {r['group']}, view {r['member']}): {r['steps']} steps, "
              f"{len(r['rows'])} rows, loss {r['first_loss']:.3f} -> {r['last_loss']:.3f}, "
              f"fresh examples (all ranks) {r['fresh_total']}")
