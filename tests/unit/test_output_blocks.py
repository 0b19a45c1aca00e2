"""The target size of the blocks leaving a preprocessing actor: just under one call's rows,
and never under MIN_BLOCK_BYTES."""

from pathlib import Path

import numpy as np

from echoray.config_load import load_config
from echoray.data.output_blocks import (
    DEFAULT_TARGET,
    MIN_BLOCK_BYTES,
    apply_block_target,
    call_block_target,
    pipeline_block_target,
    row_bytes,
)
from echoray.data.sources import SourceIndex

IMAGENET = str(Path(__file__).resolve().parents[2] / "pipelines" / "imagenet_resnet50.yaml")


def test_call_block_target_is_nine_tenths_of_one_calls_rows_and_at_least_the_floor():
    assert row_bytes(16, 1) == 256 + 48
    assert MIN_BLOCK_BYTES == 1024 * 1024
    assert call_block_target(128, 16, 1) == MIN_BLOCK_BYTES  # digits: one call is 35,020 bytes
    assert call_block_target(4096, 16, 1) == int(0.9 * 4096 * 304)  # 1.12 MB: over the floor
    assert call_block_target(64, 224, 3) == int(0.9 * 64 * (224 * 224 * 3 + 48))
    assert call_block_target(10**6, 224, 3) == DEFAULT_TARGET  # never above Ray Data's default
    assert call_block_target(128, None, 3) is None and call_block_target(0, 16, 1) is None


def _idx(kind: str, image_size, channels: int = 3) -> SourceIndex:
    return SourceIndex(kind=kind, num_classes=10, train_ids=np.arange(8), eval_ids=np.arange(2),
                       image_size=image_size, channels=channels, details={})


def test_the_pipeline_target_follows_what_leaves_the_actor():
    """The side of the images the actor emits: the crop's size when the actor crops, the
    source's size when the augmentation runs on the worker; no target for text."""
    imagenet = load_config(IMAGENET, [])
    assert pipeline_block_target(imagenet, _idx("image_folder", 256), 2) == call_block_target(64, 224, 3)
    on_worker = load_config(IMAGENET, ["preprocess.augment.on=worker"])
    assert pipeline_block_target(on_worker, _idx("image_folder", 256), 2) == call_block_target(64, 256, 3)
    digits = load_config(None, [])
    assert pipeline_block_target(digits, _idx("digits", 16, 1), 128) == call_block_target(128, 16, 1)
    assert pipeline_block_target(digits, _idx("text", None, 1), 8) is None


def test_a_block_target_sets_ray_datas_block_size_and_none_keeps_its_default():
    """The attribute is Ray Data's own public one (a misspelt one would be a new attribute
    read by nobody): its default is DEFAULT_TARGET, and text leaves it there."""
    from ray.data import DataContext

    ctx = DataContext()
    assert ctx.target_max_block_size == DEFAULT_TARGET
    apply_block_target(ctx, None)
    assert ctx.target_max_block_size == DEFAULT_TARGET
    target = call_block_target(64, 224, 3)
    apply_block_target(ctx, target)
    assert ctx.target_max_block_size == target
