"""resize_batch's enlargement (OpenCV, float32) against torch's bilinear resize, the
reference the shrink still uses."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from echoray.data.decode import resize_batch
from echoray.data.sources.digits import load_arrays


def torch_bilinear(images: np.ndarray, size: int) -> np.ndarray:
    x = torch.from_numpy(images).permute(0, 3, 1, 2).float()
    y = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    return y.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous().numpy()


@pytest.mark.parametrize("size", [16, 24, 32])
def test_digits_enlarged_by_whole_numbers_are_torchs_values_exactly(size):
    images, _ = load_arrays()
    assert np.array_equal(resize_batch(images, size), torch_bilinear(images, size))


@pytest.mark.parametrize("shape, size", [((1797, 8, 8, 1), 11), ((1797, 8, 8, 1), 13), ((40, 7, 9, 3), 31)])
def test_other_enlargements_are_within_one_level_of_torchs(shape, size):
    images = load_arrays()[0] if shape[0] == 1797 else np.random.default_rng(0).integers(0, 256, shape, np.uint8)
    got, want = resize_batch(images, size), torch_bilinear(images, size)
    assert got.shape == want.shape == (shape[0], size, size, shape[3])
    diff = np.abs(got.astype(int) - want)
    assert diff.max() <= 1 and (diff > 0).mean() < 0.05


def test_a_shrink_is_torchs_antialiased_resize():
    images = np.random.default_rng(1).integers(0, 256, (4, 32, 32, 3), np.uint8)
    assert np.array_equal(resize_batch(images, 16), torch_bilinear(images, 16))
