"""Decode only the part of a JPEG that a crop's resize reads.

`decode_for_box(data, w, h, min_w, min_h, box, out, max_shrink)` returns (pixels, box'):
the pixels a bilinear resize of `box` to `out` can touch, decoded at the DCT scale
simplejpeg picks for min_w x min_h (`dct_scale`), and the box moved into those pixels'
coordinates. Resizing box' of the pixels gives what resizing the scaled box of the
whole decoded image gives, pixel for pixel (tests/unit/test_jpeg_region.py): the same
libjpeg pixels, and an integer shift of warpAffine's sample positions (a shifted float
sum may round differently, so a sample within that rounding of one of warpAffine's
1/32-pixel steps could in principle move by one step; none did in the tests). It returns None
where the partial decode does not apply, and the caller decodes the whole image: the C
module was not built; libjpeg refuses the data (e.g. CMYK); the scaled box shrinks by
more than `max_shrink`, where the resize is PIL's antialiased one, whose float weights
moved by a shift round differently (a level or two on a few pixels, seen in testing).

The partial decode (libjpeg-turbo's jpeg_crop_scanline and jpeg_skip_scanlines, in
_jpeg_region.c) still entropy-decodes the rows above the window, skips their IDCT, and
stops after its last row. No maintained Python package offers it on these machines:
simplejpeg has no region, PyTurboJPEG 2 needs libjpeg-turbo 3's tj3 API (Debian 12 ships
2.1.5), and its lossless crop re-encodes. Measured here on the benchmark's 500x375
quality-90 JPEGs with random-resized-crop boxes: 1,124-1,228 images per CPU-second,
against 971-1,026 for simplejpeg's full decode (1.12-1.20x).
"""

from __future__ import annotations

import math

import numpy as np

try:
    from echoray.data._jpeg_region import decode_region
except ImportError:  # built by setup.py when libjpeg's headers are there
    decode_region = None

Box = tuple[float, float, float, float]

# Columns a decoded window's left or right edge gets wrong when it is not the image's own
# edge: fancy chroma upsampling treats the window's edge as the image's (one column).
EDGE_COLUMNS = 1


def available() -> bool:
    """Whether the C module was built (setup.py; Debian libjpeg62-turbo-dev)."""
    return decode_region is not None


def scaled_size(w: int, h: int, num: int) -> tuple[int, int]:
    """(w, h) of an image decoded at num/8: ceil(w * num / 8) x ceil(h * num / 8), libjpeg's rounding."""
    return -(-w * num // 8), -(-h * num // 8)


def dct_scale(w: int, h: int, min_w: int, min_h: int) -> int:
    """num of the num/8 scale simplejpeg decodes at for min_w x min_h: the smallest whose
    scaled_size holds it (8, full size, when none smaller does)."""
    for num in range(1, 8):
        sw, sh = scaled_size(w, h, num)
        if sw >= min_w and sh >= min_h:
            return num
    return 8


def shrink_of(box: Box, out: tuple[int, int]) -> float:
    """How many times a resize of `box` (x0, y0, x1, y1) to `out` (w, h) shrinks it, on
    its more shrunk side: above decode.MAX_BILINEAR_SHRINK resize_box is PIL's antialiased
    resize, and the partial decode does not apply."""
    return max((box[2] - box[0]) / out[0], (box[3] - box[1]) / out[1])


def reach(box: Box, size: tuple[int, int]) -> tuple[int, int, int, int]:
    """[x0, x1) x [y0, y1) of the pixels a bilinear resize of `box` can read from an image
    of `size` (w, h): the box, one pixel of the filter's support on each side, and one more
    (a sample at the box's edge), clipped to the image."""
    x0, y0, x1, y1 = box
    w, h = size
    return (max(0, math.floor(x0) - 2), max(0, math.floor(y0) - 2),
            min(w, math.ceil(x1) + 2), min(h, math.ceil(y1) + 2))


def decode_for_box(data: bytes, w: int, h: int, min_w: int, min_h: int, box: Box,
                   out: tuple[int, int], max_shrink: float) -> tuple[np.ndarray, Box] | None:
    """(pixels, box moved into them), or None (see the module's docstring). `box` is in
    full-image pixels; it is scaled like the image."""
    if decode_region is None:
        return None
    num = dct_scale(w, h, min_w, min_h)
    sw, sh = scaled_size(w, h, num)
    sx, sy = sw / w, sh / h
    scaled = (box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy)
    if shrink_of(scaled, out) > max_shrink:
        return None
    x0, y0, x1, y1 = reach(scaled, (sw, sh))
    ax0, ax1 = max(0, x0 - EDGE_COLUMNS), min(sw, x1 + EDGE_COLUMNS)
    try:
        buf, xoffset, width = decode_region(data, num, ax0, ax1 - ax0, y0, y1)
    except ValueError:
        return None
    pixels = np.frombuffer(buf, np.uint8).reshape(y1 - y0, width, 3)
    pixels = pixels[:, x0 - xoffset:x1 - xoffset]
    return pixels, (scaled[0] - x0, scaled[1] - y0, scaled[2] - x0, scaled[3] - y0)
