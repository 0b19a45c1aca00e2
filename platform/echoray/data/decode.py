"""Decode encoded images: to one square size (evaluation, fixed-size datasets) or
straight to a random-resized crop of the full image (training on photos).

JPEGs are decoded with simplejpeg (libjpeg-turbo) at the smallest DCT scale
(1/2, 1/4, 1/8) that still gives the pixels the output needs; other formats and
JPEGs it refuses (e.g. CMYK) go through PIL. Measured on 93 KB 500x375 quality-90
JPEGs (benchmarks/jpeg_set.py), one thread, images/s:
    PIL full 330, PIL draft 1/2 460, PIL draft 1/4 990,
    simplejpeg full 1010, 1/2 1150, 1/4 1220.
simplejpeg's full decode is 3x PIL's (PIL converts through its own buffers), and
at these file sizes Huffman decoding dominates, so DCT scaling adds only 10-20%.
A random-resized crop of a 3-channel JPEG decodes only the rows and columns its resize
reads (data/jpeg_region.py, libjpeg-turbo's partial decode; pixel-identical), which made
decode + crop + resize 1.30-1.46x faster on those files.

The crop's resize (`resize_box`) is OpenCV's bilinear warpAffine of the exact float box.
After the DCT scaling a random-resized crop shrinks by at most 1.56x (0.54-1.56, median
1.11, on those files), where a bilinear sample needs no antialiasing; PIL's antialiased
resize of the same boxes cost as much CPU as the decode itself (benchmarks/actor_cost.py resize_choice,
same process, same 256 crops, resizes per CPU-second: PIL 1095, cv2.warpAffine 2708,
cv2.resize of the box rounded to whole pixels 6313; mean pixel difference from PIL 1.0
for warpAffine, 2.9 for the rounded box). A box shrunk more than MAX_BILINEAR_SHRINK
(a large PNG to a small square) keeps PIL's antialiased resize.
"""

from __future__ import annotations

import io
import math
import re

import cv2
import numpy as np
import simplejpeg
from PIL import Image, UnidentifiedImageError

from echoray.data.jpeg_region import decode_for_box, shrink_of
from echoray.data.sources.base import SourceError

_DECODE_ERRORS = (UnidentifiedImageError, OSError, ValueError, TypeError)  # TypeError: a null cell
MAX_BILINEAR_SHRINK = 2.0  # beyond it a bilinear sample skips pixels: PIL's antialiased resize
cv2.setNumThreads(1)  # one image per call: an actor's parallelism is its reads in flight, not cv2's pool


def resize_batch(images: np.ndarray, size: int | None) -> np.ndarray:
    """Bilinear resize of a uint8 NHWC batch to size x size (no-op when it already is),
    antialiased when it shrinks. An enlargement (digits' 8 x 8 to 16 x 16, on the driver
    before Ray starts) is OpenCV's bilinear in float32: torch's values at whole-number
    scales, within one level at others (tests/unit/test_decode_resize.py), without the
    1.4 s of importing torch before Ray starts. A shrink imports torch here, not with the
    module."""
    if size is None or images.shape[1:3] == (size, size):
        return images
    if size >= max(images.shape[1:3]):
        return _enlarge(images, size)
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(images).permute(0, 3, 1, 2).float()
    y = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    return y.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous().numpy()


def _enlarge(images: np.ndarray, size: int) -> np.ndarray:
    out = np.empty((len(images), size, size, images.shape[3]), np.uint8)
    for i, image in enumerate(images):
        big = cv2.resize(image.astype(np.float32), (size, size), interpolation=cv2.INTER_LINEAR)
        out[i] = np.clip(np.round(big), 0, 255).reshape(size, size, -1)
    return out


def image_size_of(data: bytes) -> tuple[int, int]:
    """(width, height) from the header alone."""
    if simplejpeg.is_jpeg(data):
        try:
            h, w, _, _ = simplejpeg.decode_jpeg_header(data)
            return w, h
        except ValueError:
            pass
    with Image.open(io.BytesIO(data)) as img:
        return img.size


def decode_scaled(data: bytes, min_w: int = 0, min_h: int = 0, channels: int = 3) -> np.ndarray:
    """H x W x C uint8, decoded at the smallest DCT scale that keeps >= min_w x min_h
    (full size for non-JPEGs and min 0)."""
    if channels == 3 and simplejpeg.is_jpeg(data):
        try:
            return simplejpeg.decode_jpeg(data, colorspace="RGB", min_width=min_w, min_height=min_h)
        except ValueError:
            pass  # a JPEG turbo's tj API refuses (CMYK, odd markers): PIL knows more
    with Image.open(io.BytesIO(data)) as img:
        if min_w and min_h:
            img.draft("RGB" if channels == 3 else "L", (min_w, min_h))
        img.load()
        arr = np.asarray(img.convert("L" if channels == 1 else "RGB"), dtype=np.uint8)
    return arr[:, :, None] if arr.ndim == 2 else arr


def min_decode_size(w: int, h: int, cw: float, ch: float, size: int) -> tuple[int, int]:
    """The least (w, h) a decode of a w x h image may keep (decode_scaled's min_w, min_h) for
    its cw x ch part to still have size x size pixels: ceil(w * size / cw) x ceil(h * size / ch)."""
    return math.ceil(w * size / cw), math.ceil(h * size / ch)


def resize_box(arr: np.ndarray, box: tuple[float, float, float, float], out: tuple[int, int],
               mirror: bool = False) -> np.ndarray:
    """Crop box (x0, y0, x1, y1, float pixels) of arr, resized to out (w, h) in one bilinear
    pass with no intermediate crop copy, mirrored left-right when `mirror`; contiguous
    H x W x C uint8. Pixel centres align as in PIL's box resize (output pixel d samples the
    box at x0 + (d + 0.5) * scale); edge pixels repeat past the image's border."""
    if shrink_of(box, out) > MAX_BILINEAR_SHRINK:
        res = _antialiased(arr, box, out)
    else:
        x0, y0, x1, y1 = box
        sx, sy = (x1 - x0) / out[0], (y1 - y0) / out[1]
        m = np.array([[sx, 0.0, x0 + 0.5 * sx - 0.5], [0.0, sy, y0 + 0.5 * sy - 0.5]])
        res = cv2.warpAffine(arr, m, out, flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                             borderMode=cv2.BORDER_REPLICATE)
    if mirror:
        res = cv2.flip(res, 1)  # the flip op's exact mirror, contiguous (a [:, ::-1] view is not)
    return res[:, :, None] if res.ndim == 2 else res


def _antialiased(arr: np.ndarray, box: tuple[float, float, float, float], out: tuple[int, int]) -> np.ndarray:
    mode = "L" if arr.shape[2] == 1 else "RGB"
    img = Image.fromarray(arr[:, :, 0] if mode == "L" else arr, mode)
    return np.asarray(img.resize(out, Image.BILINEAR, box=box), dtype=np.uint8)


def _fit_square(arr: np.ndarray, size: int) -> np.ndarray:
    """Resize the shorter side to `size`, then centre-crop a square (keeps aspect)."""
    h, w = arr.shape[:2]
    side = min(w, h)  # the centred square of the source, resized once
    left, top = (w - side) / 2, (h - side) / 2
    return resize_box(arr, (left, top, left + side, top + side), (size, size))


def decode_one(data: bytes, size: int | None, channels: int, name: str) -> np.ndarray:
    """Decode; with `size`, resize the shorter side to it and centre-crop (evaluation)."""
    try:
        if size is None:
            return decode_scaled(data, channels=channels)
        w, h = image_size_of(data)
        s = min(w, h)  # keep >= size pixels on the shorter side after DCT scaling
        arr = decode_scaled(data, *min_decode_size(w, h, s, s, size), channels)
        return _fit_square(arr, size)
    except _DECODE_ERRORS as exc:
        raise BadImage(name, undecodable_reason(exc, data)) from exc


def decode_crop(data: bytes, box_of, size: int, channels: int, name: str, mirror: bool = False) -> np.ndarray:
    """Decode only as finely as a crop needs: box_of(w, h) -> (x0, y0, cw, ch) in full-image
    pixels; the crop is resized to size x size (a random-resized crop of the full image),
    mirrored left-right when `mirror`."""
    try:
        w, h = image_size_of(data)
        x0, y0, cw, ch = box_of(w, h)
        min_w, min_h = min_decode_size(w, h, cw, ch, size)
        if channels == 3 and simplejpeg.is_jpeg(data):
            part = decode_for_box(data, w, h, min_w, min_h, (x0, y0, x0 + cw, y0 + ch), (size, size),
                                  MAX_BILINEAR_SHRINK)
            if part is not None:  # only the rows and columns the resize reads (data/jpeg_region.py)
                return resize_box(*part, (size, size), mirror)
        arr = decode_scaled(data, min_w, min_h, channels)
        sx, sy = arr.shape[1] / w, arr.shape[0] / h
        return resize_box(arr, (x0 * sx, y0 * sy, (x0 + cw) * sx, (y0 + ch) * sy), (size, size), mirror)
    except _DECODE_ERRORS as exc:
        raise BadImage(name, undecodable_reason(exc, data)) from exc


def decode_full(data: bytes, channels: int, name: str) -> np.ndarray:
    try:
        return decode_scaled(data, channels=channels)
    except _DECODE_ERRORS as exc:
        raise BadImage(name, undecodable_reason(exc, data)) from exc


def mixed_sizes_message(listed: str) -> str:
    return f"images have different sizes ({listed}); set source.image_size to resize them"


def undecodable_reason(exc: Exception, data) -> str:
    """Why `data` did not decode, in words: never the repr of the buffer PIL was handed."""
    if data is None:
        return "no image bytes, a null cell"
    if len(data) == 0:
        return "empty file, 0 bytes"
    if isinstance(exc, UnidentifiedImageError):
        return f"not a readable image, {len(data)} bytes"
    return re.sub(r"<[\w.]+ object at 0x[0-9a-f]+>", "the file", str(exc))


class BadImage(SourceError):
    def __init__(self, name: str, reason: str):
        super().__init__(f"cannot decode image {name}: {reason}")
        self.name, self.reason = name, reason


def default_decoder(size: int | None, channels: int):
    """(position, bytes, name) -> array: the square decode of evaluation and fixed-size data."""
    return lambda pos, data, name: decode_one(data, size, channels, name)


def decode_guarded(decoder, pos: int, data, name: str):
    """decoder's array, or the BadImage it raised (so a thread pool can carry it back)."""
    try:
        return decoder(pos, data, name)
    except BadImage as exc:
        return exc


def collect(results, ids: np.ndarray, names: list[str], skip_bad: bool):
    """Arrays or BadImages per id -> (arrays, names, kept mask, [(id, name, reason)] of bad ones).

    With skip_bad False the first undecodable file raises BadImage naming it."""
    arrays, kept_names, kept, bad = [], [], [], []
    for sid, res, name in zip(ids, results, names, strict=True):
        if isinstance(res, BadImage):
            if not skip_bad:
                raise res
            bad.append((int(sid), name, res.reason))
            kept.append(False)
        else:
            arrays.append(res)
            kept_names.append(name)
            kept.append(True)
    return arrays, kept_names, np.asarray(kept, dtype=bool), bad


def decode_many(items, size: int | None, channels: int, skip_bad: bool, decoder=None):
    """Decode (id, bytes, name) items in order (see `collect`)."""
    decoder = decoder or default_decoder(size, channels)
    ids, results, names = [], [], []
    for pos, (sid, data, name) in enumerate(items):
        ids.append(sid)
        names.append(name)
        results.append(decode_guarded(decoder, pos, data, name))
    return collect(results, np.asarray(ids, dtype=np.int64), names, skip_bad)


def stack_images(arrays: list[np.ndarray], names: list[str], size: int | None = None,
                 channels: int = 3, ragged: bool = False) -> np.ndarray:
    """One uint8 N x H x W x C array; with `ragged`, an object array of H x W x C images
    (full decodes kept for per-copy crops inside the actor, see data/stages.py)."""
    if ragged:
        out = np.empty(len(arrays), dtype=object)
        for i, a in enumerate(arrays):  # one by one: same-shape arrays would be broadcast
            out[i] = a
        return out
    return stack_same_size(arrays, names, size, channels)


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
