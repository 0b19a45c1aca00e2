"""resize_box: the crop's bilinear resize (cv2.warpAffine of the float box), its mirror,
and the antialiased fallback for boxes shrunk more than MAX_BILINEAR_SHRINK."""

import numpy as np
import pytest
from PIL import Image

from echoray.data.decode import MAX_BILINEAR_SHRINK, resize_box


def smooth(h=300, w=400, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ys, xs = np.mgrid[0:h, 0:w]
    img = 120 + 80 * np.sin(xs[..., None] / 23.0 + ys[..., None] / 31.0 + rng.uniform(0, 6, 3))
    return img.clip(0, 255).astype(np.uint8)


def pil_box(arr, box, out):
    return np.asarray(Image.fromarray(arr).resize(out, Image.BILINEAR, box=box))


@pytest.mark.parametrize("channels", [1, 3])
def test_a_whole_pixel_box_at_its_own_size_is_the_crop_exactly(channels):
    """Scale 1, integer offsets: every output pixel samples one source pixel's centre."""
    arr = smooth()[:, :, :channels]
    out = resize_box(arr, (17.0, 9.0, 17.0 + 64, 9.0 + 48), (64, 48))
    assert out.shape == (48, 64, channels) and out.dtype == np.uint8 and out.flags.c_contiguous
    assert np.array_equal(out, arr[9:57, 17:81])


def test_mirror_is_the_plain_resize_flipped_left_right_exactly():
    arr = smooth()
    box = (10.3, 20.7, 250.9, 230.1)
    plain = resize_box(arr, box, (224, 224))
    mirrored = resize_box(arr, box, (224, 224), mirror=True)
    assert mirrored.flags.c_contiguous and np.array_equal(mirrored, plain[:, ::-1])


@pytest.mark.parametrize("box", [(0.0, 0.0, 400.0, 300.0), (33.4, 12.9, 281.2, 250.5), (100.5, 80.25, 180.0, 170.0)])
def test_bilinear_boxes_agree_with_pils_box_resize_on_a_smooth_image(box):
    """Shrink 1.79x to enlargement 2.8x: within 0.5 of 255 on average and 2 at worst of
    PIL's antialiased resize of the same float box (measured: 0.2 and 1), so the pixel
    centres are PIL's and the missing antialiasing costs little below a 2x shrink."""
    arr = smooth()
    ours, ref = resize_box(arr, box, (224, 168)).astype(int), pil_box(arr, box, (224, 168)).astype(int)
    assert np.abs(ours - ref).mean() < 0.5 and np.abs(ours - ref).max() <= 2


def test_boxes_shrunk_past_the_bilinear_limit_are_pils_antialiased_resize():
    arr = smooth()
    box = (0.0, 0.0, 400.0, 300.0)
    out = (int(400 / (MAX_BILINEAR_SHRINK * 1.5)), int(300 / (MAX_BILINEAR_SHRINK * 1.5)))
    assert np.array_equal(resize_box(arr, box, out), pil_box(arr, box, out))
    assert np.array_equal(resize_box(arr, box, out, mirror=True), pil_box(arr, box, out)[:, ::-1])
