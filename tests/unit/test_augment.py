import numpy as np
import pytest
import torch

from echoray.config import AugmentOp
from echoray.data.augment import augment_batch, cutout, flip, random_crop, random_resized_crop
from echoray.seeds import mix, uniform


def images(n=16, size=8, c=3):
    return torch.arange(n * size * size * c, dtype=torch.int64).remainder(251).add(1).to(torch.uint8).reshape(
        n, size, size, c)


def keys(n=16, seed=0):
    return mix(seed, np.arange(n))


def test_random_crop_is_the_shifted_window_of_the_zero_padded_image():
    x, k, p = images(), keys(), 2
    out = random_crop(x, k, 0, p)
    oy = (uniform(mix(k, 0), 0) * (2 * p + 1)).astype(int)
    ox = (uniform(mix(k, 0), 1) * (2 * p + 1)).astype(int)
    padded = np.pad(x.numpy(), ((0, 0), (p, p), (p, p), (0, 0)))
    for i in range(len(x)):
        ref = padded[i, oy[i] : oy[i] + 8, ox[i] : ox[i] + 8]
        assert np.array_equal(out[i].numpy(), ref)
    assert len({(a, b) for a, b in zip(oy, ox, strict=True)}) > 5  # per-sample offsets


def test_flip_with_p_one_and_zero():
    x, k = images(), keys()
    assert torch.equal(flip(x, k, 0, 1.0), x.flip(2))
    assert torch.equal(flip(x, k, 0, 0.0), x)


def test_flip_probability_is_per_sample():
    x = images(n=2000, size=4, c=1)
    out = flip(x, keys(2000), 0, 0.5)
    flipped = (out != x).flatten(1).any(1).float().mean().item()
    assert 0.45 < flipped < 0.55


def test_cutout_zeroes_a_size_by_size_square_when_inside():
    x = torch.full((64, 16, 16, 1), 200, dtype=torch.uint8)
    out = cutout(x, keys(64), 0, 4)
    zeros = (out == 0).flatten(1).sum(1)
    assert zeros.max().item() == 16  # 4x4 square fully inside
    assert zeros.min().item() >= 4  # clipped at a corner still removes >= 2x2
    assert torch.all(out[out != 0] == 200)


def test_random_resized_crop_shape_and_identity_box():
    x = images(n=8, size=32)
    out = random_resized_crop(x, keys(8), 0, 16, (0.08, 1.0), (0.75, 1.333))
    assert out.shape == (8, 16, 16, 3) and out.dtype == torch.uint8
    full = random_resized_crop(x, keys(8), 0, 32, (1.0, 1.0), (1.0, 1.0))
    assert torch.equal(full, x)  # adaptive sampling: one bilinear tap per pixel = identity


def test_same_key_same_augmentation_any_batching():
    ops = [AugmentOp(op="random_crop", padding=2), AugmentOp(op="flip"), AugmentOp(op="cutout", size=3)]
    x, k = images(), keys()
    whole = augment_batch(x, k, ops)
    parts = torch.cat([augment_batch(x[:5], k[:5], ops), augment_batch(x[5:], k[5:], ops)])
    assert torch.equal(whole, parts)
    other = augment_batch(x, keys(seed=1), ops)
    assert not torch.equal(whole, other)


def test_key_count_must_match():
    with pytest.raises(ValueError, match="keys"):
        augment_batch(images(), keys(3), [AugmentOp(op="flip")])
