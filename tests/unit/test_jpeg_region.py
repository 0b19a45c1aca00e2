"""data/jpeg_region.py: a crop decoded from only the rows and columns its resize reads is
the crop decoded from the whole image, pixel for pixel, for every kind of JPEG; the
module is built; bad data falls back to the whole decode and its errors."""

import io
import math

import numpy as np
import pytest
import simplejpeg
from PIL import Image

from echoray.data import jpeg_region
from echoray.data.decode import BadImage, decode_crop


def photo(w: int, h: int, seed: int) -> np.ndarray:
    """Smooth colour + noise: chroma edges and busy blocks, where upsampling and the
    region's edges would show."""
    rng = np.random.default_rng(seed)
    ys, xs = np.mgrid[0:h, 0:w]
    img = 128 + 70 * np.sin(xs[..., None] / 17.0 + ys[..., None] / 29.0 + rng.uniform(0, 6, 3))
    return (img + rng.normal(0, 20, (h, w, 3))).clip(0, 255).astype(np.uint8)


def jpeg(w: int, h: int, seed: int = 0, mode: str = "RGB", **save) -> bytes:
    img = Image.fromarray(photo(w, h, seed))
    buf = io.BytesIO()
    img.convert(mode).save(buf, "JPEG", quality=90, **save)
    return buf.getvalue()


KINDS = {
    "4:2:0": dict(subsampling=2),
    "4:2:2": dict(subsampling=1),
    "4:4:4": dict(subsampling=0),
    "progressive": dict(progressive=True),
    "restart markers": dict(restart_marker_blocks=3),
}


def random_boxes(w: int, h: int, n: int, seed: int) -> list[tuple[int, int, int, int]]:
    """Random-resized-crop boxes (area 8-100%, aspect 3/4-4/3), and the edges and corners."""
    rng = np.random.default_rng(seed)
    boxes = [(0, 0, w, h), (0, 0, w // 3, h // 2), (w - w // 3, h - h // 2, w // 3, h // 2), (w - 40, 0, 40, h)]
    while len(boxes) < n:
        a, r = w * h * rng.uniform(0.08, 1.0), math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        cw, ch = round(math.sqrt(a * r)), round(math.sqrt(a / r))
        if 0 < cw <= w and 0 < ch <= h:
            boxes.append((int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1)), cw, ch))
    return boxes


def whole_decode(monkeypatch, data, box, size, mirror):
    with monkeypatch.context() as m:
        m.setattr(jpeg_region, "decode_region", None)
        return decode_crop(data, lambda w, h: box, size, 3, "x", mirror)


def test_the_partial_decoder_is_built():
    """setup.py builds it where libjpeg's headers are (CI installs them); without it every
    crop decodes the whole image, slower, and nothing else would say so."""
    assert jpeg_region.available()


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("w,h", [(500, 375), (333, 217)])
def test_a_crop_from_the_partial_decode_is_the_crop_from_the_whole_image(monkeypatch, kind, w, h):
    """Invariance: 40 boxes each, at 224 (full-size and 7/8-5/8 DCT scales) and at 48
    (1/8-1/4 scales), mirrored and not; odd sizes put partial iMCUs at the right and
    bottom edges. Exactly equal, not close: the same libjpeg pixels, the same resize."""
    data = jpeg(w, h, seed=w, **KINDS[kind])
    calls = []
    real = jpeg_region.decode_region
    monkeypatch.setattr(jpeg_region, "decode_region", lambda *a: calls.append(a) or real(*a))
    for i, box in enumerate(random_boxes(w, h, 40, seed=h)):
        for size in (224, 48):
            mirror = bool(i % 2)
            part = decode_crop(data, lambda w, h, b=box: b, size, 3, "x", mirror)
            whole = whole_decode(monkeypatch, data, box, size, mirror)
            assert part.shape == (size, size, 3) and part.flags.c_contiguous
            assert np.array_equal(part, whole), (kind, box, size)
    # of the 80 crops, those shrunk past the bilinear limit at 48 decode whole: 4 of 500x375's
    assert len(calls) == {(500, 375): 76, (333, 217): 79}[w, h]
    assert any(y0 > 0 for *_, y0, _ in calls) and any(x > 0 for _, _, x, *_ in calls)


def test_a_grayscale_jpeg_crops_to_rgb_like_the_whole_decode(monkeypatch):
    data = jpeg(320, 240, mode="L")
    for box in random_boxes(320, 240, 10, seed=3):
        part = decode_crop(data, lambda w, h, b=box: b, 64, 3, "x")
        assert np.array_equal(part, whole_decode(monkeypatch, data, box, 64, False))


@pytest.mark.parametrize("w,h", [(500, 375), (333, 217), (64, 48)])
def test_dct_scale_is_the_scale_simplejpeg_decodes_at(w, h):
    data = jpeg(w, h)
    for min_w in range(1, w + 40, 7):
        min_h = max(1, min_w * h // w)
        num = jpeg_region.dct_scale(w, h, min_w, min_h)
        got = simplejpeg.decode_jpeg(data, min_width=min_w, min_height=min_h).shape[:2]
        assert got == (-(-h * num // 8), -(-w * num // 8)), (min_w, min_h, num)


def test_reach_is_the_box_and_two_pixels_more_each_side_inside_the_image():
    """Bilinear: a sample at the box's edge reads the pixel before it and the one after."""
    assert jpeg_region.reach((10.5, 20.0, 110.5, 120.0), (500, 375)) == (8, 18, 113, 122)
    assert jpeg_region.reach((1.0, 0.5, 499.2, 375.0), (500, 375)) == (0, 0, 500, 375)


def test_a_box_shrunk_past_the_bilinear_limit_is_left_to_the_whole_decode(monkeypatch):
    """40 x 375 to 48 x 48: a 7.8x vertical shrink, PIL's antialiased resize, whose weights
    round differently once shifted: no partial decode, and the crop is the whole one's."""
    data = jpeg(500, 375)
    assert jpeg_region.decode_for_box(data, 500, 375, 600, 48, (460, 0, 500, 375), (48, 48), 2.0) is None
    part = decode_crop(data, lambda w, h: (460, 0, 40, 375), 48, 3, "x")
    assert np.array_equal(part, whole_decode(monkeypatch, data, (460, 0, 40, 375), 48, False))


def test_a_region_outside_the_image_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match=r"region x=490 width=20 rows \[0, 10\) outside the 500x375 image"):
        jpeg_region.decode_region(jpeg(500, 375), 8, 490, 20, 0, 10)


def test_data_libjpeg_refuses_falls_back_to_the_whole_decode_and_its_errors():
    """A CMYK JPEG: no RGB output from libjpeg's partial decode, so the whole decode (PIL)
    crops it. Truncated bytes: the whole decode's error, named."""
    buf = io.BytesIO()
    Image.fromarray(photo(200, 150, 0)).convert("CMYK").save(buf, "JPEG", quality=90)
    cmyk = buf.getvalue()
    assert jpeg_region.decode_for_box(cmyk, 200, 150, 64, 64, (0, 0, 200, 150), (64, 64), 2.0) is None
    assert decode_crop(cmyk, lambda w, h: (10, 10, 100, 100), 64, 3, "cmyk.jpg").shape == (64, 64, 3)
    with pytest.raises(BadImage, match="broken.jpg"):
        decode_crop(jpeg(200, 150)[:300], lambda w, h: (10, 10, 100, 100), 64, 3, "broken.jpg")
