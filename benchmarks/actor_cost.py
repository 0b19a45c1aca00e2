"""Where a preprocessing actor's CPU goes, one part at a time, on the same JPEGs (issue 30).

In this process, no Ray: each step adds one part of what a MapWorker of the ImageNet
pipeline does per image, timed in CPU seconds (time.process_time, all threads), so the
figures are images per CPU-second and hold on a loaded machine as ratios:

    decode_full          simplejpeg's full decode alone: the limit (input_epochs.decode_limit)
    decode_crop_scale    the whole image at the DCT scale the crop needs (the decode before
                         data/jpeg_region.py)
    decode_crop_region   the decode the actor makes: the crop's rows and columns at that
                         scale (data/jpeg_region.py decode_for_box)
    crop_resize_whole    the crop resized to 224 from decode_crop_scale's whole image
                         (the partial decode switched off): the step the partial decode replaced
    crop_resize          the decode the actor makes + the crop's bilinear resize to 224 (resize_box)
    crop_resize_flip     + the flip, made as the crop is (crop_decoder with the flip op)
    stacked              + one uint8 N x 224 x 224 x 3 array (np.stack)
    actor_call_rc1       the actor's whole call (data/stages.py Preprocess) on plan rows:
                         file reads, keys, decode, crop, flip, stack; read_concurrency 1
    actor_call_rc16      the same with 16 reads (and decodes) in flight in threads
    resize_choice        the crop's resize alone, PIL's against OpenCV's (data/decode.py)
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
    from slow_store import overrides as slow_store

    from echoray.config import AugmentOp
    from echoray.data import jpeg_region
    from echoray.data.augment_np import CROP_RATIO, CROP_SCALE, crop_draws
    from echoray.data.decode import (
        MAX_BILINEAR_SHRINK,
        decode_scaled,
        image_size_of,
        min_decode_size,
    )
    from echoray.data.full_crop import box_at, crop_decoder

    files = sorted(root.rglob("*.JPEG"))[:n]
    datas = [f.read_bytes() for f in files]
    rrc, flip = AugmentOp(op="random_resized_crop", size=224), AugmentOp(op="flip", p=0.5)
    keys = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    draws = crop_draws(keys, 0, CROP_SCALE, CROP_RATIO)

    def crop_scale_decode():
        for i, d in enumerate(datas):
            w, h = image_size_of(d)
            _, _, cw, ch = box_at(draws, i, w, h)
            decode_scaled(d, *min_decode_size(w, h, cw, ch, 224))

    def region_decode():
        for i, d in enumerate(datas):
            w, h = image_size_of(d)
            x0, y0, cw, ch = box_at(draws, i, w, h)
            jpeg_region.decode_for_box(d, w, h, *min_decode_size(w, h, cw, ch, 224), (x0, y0, x0 + cw, y0 + ch),
                                       (224, 224), MAX_BILINEAR_SHRINK)

    def decoded(flip_op):
        dec = crop_decoder(keys, rrc, 3, flip_op)
        return [dec(i, d, "x") for i, d in enumerate(datas)]

    def whole_decoded():
        region, jpeg_region.decode_region = jpeg_region.decode_region, None
        try:
            return decoded(None)
        finally:
            jpeg_region.decode_region = region

    out = {
        "decode_full": lambda: [simplejpeg.decode_jpeg(d, colorspace="RGB") for d in datas],
        "decode_crop_scale": crop_scale_decode,
        "decode_crop_region": region_decode,
        "crop_resize_whole": whole_decoded,
        "crop_resize": lambda: decoded(None),
        "crop_resize_flip": lambda: decoded(flip),
        "stacked": lambda: np.stack(decoded(flip)),
    }
    for rc in (1, 16):
        actor, batch = _actor(echoray_cfg(root, *slow_store("image_folder", read_concurrency=rc),
                                          "source.chunk_size=32"), n)
        out[f"actor_call_rc{rc}"] = lambda actor=actor, batch=batch: _rows(actor(batch))
    return out


def _rows(calls) -> dict:
    """Drains the actor's generator (it yields a dict per call it makes of the rows it is
    given; at 55c8b64 that was several calls, and next() counted only the first one) and
    returns the last dict's rows (to_arrow converts one call's block)."""
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


def _crops(root: Path, n: int) -> list:
    """(DCT-scaled decode, crop box in its pixels) of the first n files, as the actor makes them."""
    from echoray.data.augment_np import CROP_RATIO, CROP_SCALE, crop_draws
    from echoray.data.decode import decode_scaled, image_size_of, min_decode_size
    from echoray.data.full_crop import box_at

    datas = [f.read_bytes() for f in sorted(root.rglob("*.JPEG"))[:n]]
    keys = np.arange(len(datas), dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    draws = crop_draws(keys, 0, CROP_SCALE, CROP_RATIO)
    out = []
    for i, d in enumerate(datas):
        w, h = image_size_of(d)
        x0, y0, cw, ch = box_at(draws, i, w, h)
        arr = decode_scaled(d, *min_decode_size(w, h, cw, ch, 224))
        sx, sy = arr.shape[1] / w, arr.shape[0] / h
        out.append((arr, (x0 * sx, y0 * sy, (x0 + cw) * sx, (y0 + ch) * sy)))
    return out


def resize_choice(root: Path, n: int = 256) -> dict:
    """The crop's resize, three ways on the same crops (data/decode.py's choice): PIL's
    antialiased box resize (before), cv2.warpAffine of the exact float box (resize_box now),
    cv2.resize of the box rounded to whole pixels (faster, but it moves the box); resizes
    per CPU-second (medians of ROUNDS, alternating), mean |difference| from PIL's pixels,
    and how much the crops shrink after the DCT scaling (quantiles of box width / 224)."""
    import cv2
    from PIL import Image

    from echoray.data.decode import resize_box

    def pil(a, b):
        return np.asarray(Image.fromarray(a).resize((224, 224), Image.BILINEAR, box=b))

    def rounded(a, b):
        x0, y0, x1, y1 = (int(round(v)) for v in b)
        return cv2.resize(a[y0:y1, x0:x1], (224, 224), interpolation=cv2.INTER_LINEAR)

    crops = _crops(root, n)
    fns = {"pil_antialiased": pil, "cv2_warp_affine": lambda a, b: resize_box(a, b, (224, 224)),
           "cv2_resize_rounded_box": rounded}
    rates: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(ROUNDS):
        for name, fn in fns.items():
            rates[name].append(_rates(lambda fn=fn: [fn(a, b) for a, b in crops], len(crops))[0])
    diff = {k: float(np.mean([np.abs(fn(a, b).astype(int) - pil(a, b).astype(int)).mean() for a, b in crops[:64]]))
            for k, fn in fns.items()}
    shrink = [(b[2] - b[0]) / 224 for _, b in crops]
    out = {"resizes_per_cpu_s": {k: float(np.median(v)) for k, v in rates.items()}, "rounds": rates,
           "mean_abs_diff_from_pil": diff,
           "shrink_quantiles_0_25_50_75_100": [float(q) for q in np.quantile(shrink, [0, .25, .5, .75, 1])]}
    print("resize choice", {k: round(v) for k, v in out["resizes_per_cpu_s"].items()}, flush=True)
    return out


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
           "to_arrow": to_arrow(fns["actor_call_rc1"]),
           "resize_choice": resize_choice(root, n)}
    print("actor cost", {k: round(v) for k, v in med.items()}, out["to_arrow"], flush=True)
    return out
