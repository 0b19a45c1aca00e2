"""random_resized_crop of the full decoded image, per image inside the actor.

The reference ResNet-50 pipeline (torchvision, FFCV) crops the whole photo; images
differ in size, so the crop is made per image right where it is decoded and what
leaves the actor is fixed-size uint8. The box is `crop_boxes` of the op (data/augment.py)
for the row's augmentation key, so the audit's aug_key still determines it. Without
echo before augmentation the decode is fused with the crop (only the DCT scale the
crop needs is decoded); with it, each image is decoded in full once and every echo
copy cuts its own box from that decode.
"""

from __future__ import annotations

import numpy as np

from echoray.config import AugmentOp
from echoray.data.augment import crop_boxes
from echoray.data.decode import decode_crop, decode_full, resize_box

CROP_OP_INDEX = 0  # the crop is the first op: it draws from stream 0 of the key


def box_fn(key: np.uint64, op: AugmentOp):
    def box(w: int, h: int) -> tuple[float, float, float, float]:
        x0, y0, cw, ch = crop_boxes(np.asarray([key], np.uint64), CROP_OP_INDEX, w, h, op.scale, op.ratio)
        return float(x0[0]), float(y0[0]), float(cw[0]), float(ch[0])

    return box


def crop_decoder(keys: np.ndarray, op: AugmentOp, channels: int):
    """(position, bytes, name) -> the crop of row `position`, decoded at the scale it needs."""
    keys = np.asarray(keys, np.uint64)
    return lambda pos, data, name: decode_crop(data, box_fn(keys[pos], op), op.size, channels, name)


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
