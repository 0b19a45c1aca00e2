"""The Normalizer (train/evaluate.py) turns uint8 NHWC batches into the model's float
input: the same floats as the textbook (x / 255 - mean) / std, in the model's layout."""

from __future__ import annotations

import pytest
import torch

from echoray.train.evaluate import Normalizer

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def reference(images: torch.Tensor) -> torch.Tensor:
    x = images.permute(0, 3, 1, 2).float() / 255.0
    return (x - torch.tensor(MEAN).view(1, -1, 1, 1)) / torch.tensor(STD).view(1, -1, 1, 1)


@pytest.mark.parametrize("layout", [torch.contiguous_format, torch.channels_last])
def test_the_same_floats_as_the_textbook_formula_in_the_models_layout(layout):
    images = torch.randint(0, 256, (5, 7, 9, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    out = Normalizer(MEAN, STD, 3, "cpu", memory_format=layout)(images)
    assert out.dtype == torch.float32 and out.shape == (5, 3, 7, 9)
    assert out.is_contiguous(memory_format=layout)
    assert torch.equal(out, reference(images))  # bit for bit, not close


def test_the_input_batch_is_left_as_it_was():
    images = torch.randint(0, 256, (2, 4, 4, 3), dtype=torch.uint8)
    before = images.clone()
    Normalizer(MEAN, STD, 3, "cpu", memory_format=torch.channels_last)(images)
    assert torch.equal(images, before)


def test_one_value_per_channel_is_required():
    with pytest.raises(ValueError, match="preprocess.mean/std need 3 values"):
        Normalizer([0.5], [0.25, 0.25, 0.25], 3, "cpu")
