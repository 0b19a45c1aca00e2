"""Decode encoded images and bring them to one square size (uint8, N x H x W x C)."""

from __future__ import annotations

import io

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, UnidentifiedImageError

from echoray.data.sources.base import SourceError


def resize_batch(images: np.ndarray, size: int | None) -> np.ndarray:
    """Bilinear resize of a uint8 NHWC batch to size x size (no-op when it already is)."""
    if size is None or images.shape[1:3] == (size, size):
        return images
    x = torch.from_numpy(images).permute(0, 3, 1, 2).float()
    y = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    return y.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous().numpy()


def _fit_square(img: Image.Image, size: int) -> Image.Image:
    """Resize the shorter side to `size`, then centre-crop a square (keeps aspect)."""
    w, h = img.size
    scale = size / min(w, h)
    img = img.resize((max(size, round(w * scale)), max(size, round(h * scale))), Image.BILINEAR)
    w, h = img.size
    left, top = (w - size) // 2, (h - size) // 2
    return img.crop((left, top, left + size, top + size))


def decode_one(data: bytes, size: int | None, channels: int, name: str) -> np.ndarray:
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()
            img = img.convert("L" if channels == 1 else "RGB")
            if size is not None:
                img = _fit_square(img, size)
            arr = np.asarray(img, dtype=np.uint8)
    except (UnidentifiedImageError, OSError, ValueError, TypeError) as exc:  # TypeError: a null cell
        raise BadImage(name, str(exc)) from exc
    return arr[:, :, None] if arr.ndim == 2 else arr


def mixed_sizes_message(listed: str) -> str:
    return f"images have different sizes ({listed}); set source.image_size to resize them"


class BadImage(SourceError):
    def __init__(self, name: str, reason: str):
        super().__init__(f"cannot decode image {name}: {reason}")
        self.name, self.reason = name, reason


def decode_many(items, size: int | None, channels: int, skip_bad: bool):
    """Decode (id, bytes, name) items: (arrays, names, kept mask, [(id, name, reason)] of bad ones).

    With skip_bad False the first undecodable file raises BadImage naming it."""
    arrays, names, kept, bad = [], [], [], []
    for sid, data, name in items:
        try:
            arrays.append(decode_one(data, size, channels, name))
            names.append(name)
            kept.append(True)
        except BadImage as exc:
            if not skip_bad:
                raise
            bad.append((int(sid), name, exc.reason))
            kept.append(False)
    return arrays, names, np.asarray(kept, dtype=bool), bad


def stack_same_size(arrays: list[np.ndarray], names: list[str], size: int | None = None,
                    channels: int = 3) -> np.ndarray:
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        examples = {}
        for a, n in zip(arrays, names, strict=True):
            examples.setdefault(a.shape, n)
        listed = ", ".join(f"{n} is {s[1]}x{s[0]}" for s, n in list(examples.items())[:3])
        raise SourceError(mixed_sizes_message(listed))
    if arrays:
        return np.stack(arrays)
    return np.zeros((0, size or 1, size or 1, channels), np.uint8)  # every file of the read was bad
