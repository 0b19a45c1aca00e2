"""Where a preprocessing actor's CPU goes, one part at a time, on the same JPEGs (issue 30).

In this process, no Ray: each step adds one part of what a MapWorker of the ImageNet
pipeline does per image, timed in CPU seconds (time.process_time, all threads), so the
figures are images per CPU-second and hold on a loaded machine as ratios:

    decode_full          simplejpeg's full decode alone: the limit (input_epochs.decode_limit)
    decode_crop_scale    the decode the actor makes: only the DCT scale the crop needs
    crop_resize          + the crop's antialiased bilinear resize to 224 (PIL, resize_box)
    crop_resize_flip     + the flip, made as the crop is (crop_decoder with the flip op)
    stacked              + one uint8 N x 224 x 224 x 3 array (np.stack)
    actor_call_rc1       the actor's whole call (data/stages.py Preprocess) on plan rows:
                         file reads, keys, decode, crop, flip, stack; read_concurrency 1
    actor_call_rc16      the same with 16 reads (and decodes) in flight in threads
    to_arrow             the call's batch turned into the Arrow block Ray Data stores
                         (ray.data.block.BlockAccessor.batch_to_block), and whether the
                         image column shares the numpy array's memory (zero-copy)

Steps alternate per round (3 rounds, medians). Wall-clock rates are kept too: on idle cores
actor_call_rc16 over actor_call_rc1 per wall second shows whether the threads decode in
parallel (simplejpeg and PIL's resize release the GIL). Used by input_pipeline.py --parts actor.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

ROUNDS = 3


def _rates(fn, n: int) -> tuple[float, float]:
    """(images per CPU-second, images per wall second) of one call of fn over n images."""
    c, t = time.process_time(), time.perf_counter()
    fn()
    return n / (time.process_time() - c), n / (time.perf_counter() - t)


def steps(root: Path, n: int) -> dict:
    """name -> a callable doing that step over the first n files of root."""
    import simplejpeg
    from input_pipeline import echoray_cfg

    from echoray.config import AugmentOp
    from echoray.data.augment_np import crop_draws
    from echoray.data.decode import decode_scaled, image_size_of
    from echoray.data.full_crop import box_at, crop_decoder

    files = sorted(root.rglob("*.JPEG"))[:n]
    datas = [f.read_bytes() for f in files]
    rrc, flip = AugmentOp(op="random_resized_crop", size=224), AugmentOp(op="flip", p=0.5)
    keys = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    draws = crop_draws(keys, 0, rrc.scale, rrc.ratio)

    def crop_scale_decode():
        for i, d in enumerate(datas):
            w, h = image_size_of(d)
            _, _, cw, ch = box_at(draws, i, w, h)
            decode_scaled(d, int(np.ceil(w * 224 / cw)), int(np.ceil(h * 224 / ch)))

    def decoded(flip_op):
        dec = crop_decoder(keys, rrc, 3, flip_op)
        return [dec(i, d, "x") for i, d in enumerate(datas)]

    out = {
        "decode_full": lambda: [simplejpeg.decode_jpeg(d, colorspace="RGB") for d in datas],
        "decode_crop_scale": crop_scale_decode,
        "crop_resize": lambda: decoded(None),
        "crop_resize_flip": lambda: decoded(flip),
        "stacked": lambda: np.stack(decoded(flip)),
    }
    for rc in (1, 16):
        actor, batch = _actor(echoray_cfg(root, f"source.read_concurrency={rc}", "source.chunk_size=32"), n)
        out[f"actor_call_rc{rc}"] = lambda actor=actor, batch=batch: _rows(actor(batch))
    return out


def _rows(calls) -> dict:
    """Makes every call of one plan block (the actor yields one dict a call); the last
    call's rows (to_arrow converts one call's block)."""
    *_, last = calls
    return last


def _actor(cfg, n: int):
    """A Preprocess of cfg over root's files and the plan rows of its first n images."""
    from echoray.data.preprocess_args import preprocess_args
    from echoray.data.sources import index_source
    from echoray.data.stages import Preprocess

    idx = index_source(cfg.source)
    chunks = n // cfg.source.chunk_size
    return Preprocess(preprocess_args(cfg, idx)), {"epoch": np.zeros(chunks, np.int64),
                                                   "chunk": np.arange(chunks, dtype=np.int64)}


def to_arrow(actor_step) -> dict:
    from ray.data.block import BlockAccessor

    rows = actor_step()
    n = len(rows["sample_id"])
    c = time.process_time()
    block = BlockAccessor.batch_to_block(rows)
    spent = time.process_time() - c
    col = block.column("image").chunk(0)
    buffers = [b for b in col.storage.buffers() if b is not None] if hasattr(col, "storage") else []
    shared = any(b.address == rows["image"].ctypes.data for b in buffers)
    return {"images_per_cpu_s": n / spent if spent > 0 else None, "zero_copy": bool(shared),
            "image_type": str(block.schema.field("image").type)}


def actor_cost(root: Path, n: int = 256) -> dict:
    """Images per CPU-second of each step (medians of ROUNDS), and each step's share of the
    actor call's CPU (1 / rate over 1 / actor rate)."""
    fns = steps(root, n)
    rates: dict[str, list[float]] = {k: [] for k in fns}
    walls: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(ROUNDS):
        for name, fn in fns.items():
            cpu, wall = _rates(fn, n)
            rates[name].append(cpu)
            walls[name].append(wall)
    med = {k: float(np.median(v)) for k, v in rates.items()}
    call = med["actor_call_rc1"]
    out = {"images_per_cpu_s": med, "rounds": rates, "files": n, "cores": len(os.sched_getaffinity(0)),
           # on idle cores: rc16 over rc1 per wall second above 1 only if the threads' decode
           # and resize run in parallel (the decoders release the GIL)
           "images_per_wall_s": {k: float(np.median(v)) for k, v in walls.items()},
           "share_of_actor_call_rc1": {k: call / v for k, v in med.items()},
           "to_arrow": to_arrow(fns["actor_call_rc1"])}
    print("actor cost", {k: round(v) for k, v in med.items()}, out["to_arrow"], flush=True)
    return out
