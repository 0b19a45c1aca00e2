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


NUMPY_CHAINS = [
    [AugmentOp(op="random_crop", padding=2)],
    [AugmentOp(op="random_crop", padding=4), AugmentOp(op="flip", p=0.5)],
    [AugmentOp(op="flip", p=0.3), AugmentOp(op="cutout", size=3), AugmentOp(op="random_crop", padding=1)],
    [AugmentOp(op="cutout", size=8), AugmentOp(op="flip", p=1.0)],
    [AugmentOp(op="random_crop", padding=0), AugmentOp(op="cutout", size=1)],
]


@pytest.mark.parametrize("ops", NUMPY_CHAINS, ids=lambda ops: "+".join(o.op for o in ops))
@pytest.mark.parametrize("shape", [(64, 16, 16, 1), (37, 9, 13, 3)])
def test_numpy_ops_give_the_torch_ops_bytes(ops, shape):
    """The CPU actor's numpy ops (data/augment_np.py) must equal the torch ops byte for byte:
    a pipeline's samples may not depend on which of the two made them."""
    from echoray.data import augment_np

    rng = np.random.default_rng(shape[0])
    x = rng.integers(1, 256, size=shape, dtype=np.uint8)
    for seed in range(3):
        k = keys(shape[0], seed)
        want = augment_batch(torch.from_numpy(x), k, ops).numpy()
        got = augment_np.augment_batch(x, k, ops)
        assert got.dtype == np.uint8 and got.flags.c_contiguous
        assert np.array_equal(got, want), (ops, seed)
        first = 1  # ops before `first` were applied at decode time
        assert np.array_equal(augment_np.augment_batch(x, k, ops, first),
                              augment_batch(torch.from_numpy(x), k, ops, first).numpy())


def test_numpy_ops_cover_crop_flip_cutout_and_leave_resized_crops_to_torch():
    from echoray.data import augment_np

    resized = AugmentOp(op="random_resized_crop", size=8)
    assert augment_np.handles(NUMPY_CHAINS[2])
    assert not augment_np.handles([AugmentOp(op="flip", p=0.5), resized])
    assert augment_np.handles([resized, AugmentOp(op="flip", p=0.5)], first=1)  # the crop made at decode
    with pytest.raises(ValueError, match="3 keys for 4 images"):
        augment_np.augment_batch(np.zeros((4, 8, 8, 1), np.uint8), keys(3), NUMPY_CHAINS[0])
