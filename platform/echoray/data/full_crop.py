"""random_resized_crop of the full decoded image, per image inside the actor.

The reference ResNet-50 pipeline (torchvision, FFCV) crops the whole photo; images
differ in size, so the crop is made per image right where it is decoded and what
leaves the actor is fixed-size uint8. The box is `crop_boxes` of the op (data/augment_np.py)
for the row's augmentation key, so the audit's aug_key still determines it. Without
echo before augmentation the decode is fused with the crop (only the DCT scale the
crop needs is decoded); with it, each image is decoded in full once and every echo
copy cuts its own box from that decode.
"""

from __future__ import annotations

import math

import numpy as np

from echoray.config import AugmentOp
from echoray.data.augment_np import CROP_RATIO, CROP_SCALE, crop_boxes, crop_draws, flip_mask
from echoray.data.decode import decode_crop, decode_full, resize_box

CROP_OP_INDEX = 0  # the crop is the first op: it draws from stream 0 of the key
FLIP_OP_INDEX = 1  # a flip right after it is made where the crop is (decoded_ops)


def box_fn(key: np.uint64, op: AugmentOp):
    def box(w: int, h: int) -> tuple[float, float, float, float]:
        x0, y0, cw, ch = crop_boxes(np.asarray([key], np.uint64), CROP_OP_INDEX, w, h, CROP_SCALE, CROP_RATIO)
        return float(x0[0]), float(y0[0]), float(cw[0]), float(ch[0])

    return box


def box_at(draws: tuple[np.ndarray, ...], pos: int, w: int, h: int) -> tuple[float, float, float, float]:
    """boxes_from_draws for row `pos` alone, in Python floats: IEEE double products, quotients
    and square roots round as numpy's float64 ones do, and min/max is np.clip, so the box is
    bit for bit crop_boxes' (tests/unit/test_photo_input.py pins boxes of the seeds)."""
    share, r, u2, u3 = (float(d[pos]) for d in draws)
    fw, fh = float(w), float(h)
    area = share * (fw * fh)
    cw = min(max(math.sqrt(area * r), 1.0), fw)
    ch = min(max(math.sqrt(area / r), 1.0), fh)
    return u2 * (fw - cw), u3 * (fh - ch), cw, ch


def decoded_ops(ops: list[AugmentOp], per_copy: bool) -> int:
    """How many leading ops the decode applies: the crop, and a flip right after it (mirrored
    as it is stacked, not in one more pass over the batch); a per-copy crop of full decodes
    (crop_each) makes the crop only."""
    return 2 if not per_copy and len(ops) > FLIP_OP_INDEX and ops[FLIP_OP_INDEX].op == "flip" else 1


def crop_decoder(keys: np.ndarray, op: AugmentOp, channels: int, flip: AugmentOp | None = None):
    """(position, bytes, name) -> the crop of row `position`, decoded at the scale it needs,
    mirrored where `flip` (op FLIP_OP_INDEX) says. The key-only draws of the boxes are made
    once for all rows (crop_draws), each box placed when its image's size is read (box_at):
    the same boxes as crop_boxes per image, bit for bit, in a few float operations instead
    of ~40 numpy calls on one-element arrays per image."""
    keys = np.asarray(keys, np.uint64)
    draws = crop_draws(keys, CROP_OP_INDEX, CROP_SCALE, CROP_RATIO)
    mirrored = flip_mask(keys, FLIP_OP_INDEX, flip.p) if flip is not None else None

    def decode(pos: int, data: bytes, name: str) -> np.ndarray:
        mirror = mirrored is not None and bool(mirrored[pos])
        return decode_crop(data, lambda w, h: box_at(draws, pos, w, h), op.size, channels, name, mirror)

    return decode


def full_decoder(channels: int):
    return lambda pos, data, name: decode_full(data, channels, name)


def crop_each(images: np.ndarray, keys: np.ndarray, op: AugmentOp, channels: int) -> np.ndarray:
    """Object array of full H x W x C decodes -> N x size x size x C, one box per key."""
    keys = np.asarray(keys, np.uint64)
    out = np.empty((len(images), op.size, op.size, channels), np.uint8)
    for n, (img, key) in enumerate(zip(images, keys, strict=True)):
        h, w = img.shape[:2]
        x0, y0, cw, ch = box_fn(key, op)(w, h)
        out[n] = resize_box(img, (x0, y0, x0 + cw, y0 + ch), (op.size, op.size))
    return out
