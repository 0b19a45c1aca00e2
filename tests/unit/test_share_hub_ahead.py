"""How far a shared stream's Ray Data pipeline may run ahead of its window
(tune/share_hub.py ahead_bytes): bytes from the rows the window may hold."""

from types import SimpleNamespace

import pytest

from echoray.config_load import load_config
from echoray.tune.share_hub import AHEAD_FLOOR_BYTES, ahead_bytes, row_bytes

pytestmark = pytest.mark.unit

CROP = "preprocess.augment={on: cpu, ops: [{op: random_resized_crop, size: 224}, {op: flip}]}"


def image_index(side: int, channels: int = 3):
    return SimpleNamespace(kind="image_folder", image_size=side, channels=channels, details={})


def test_an_image_row_is_its_cropped_uint8_image_plus_ids():
    cfg = load_config(None, [CROP])
    assert row_bytes(cfg, image_index(256)) == 224 * 224 * 3 + 64  # the crop's side, not the source's
    plain = load_config(None, ["preprocess.augment={on: worker, ops: []}"])
    assert row_bytes(plain, image_index(32, 1)) == 32 * 32 + 64


def test_a_text_row_is_its_packed_sequence():
    cfg = load_config(None, [])
    text = SimpleNamespace(kind="text", image_size=None, channels=0, details={"seq_len": 64})
    assert row_bytes(cfg, text) == 8 * 65 + 64


def test_the_limit_is_twice_the_window_and_never_below_the_floor():
    cfg = load_config(None, [CROP])
    per_row = 224 * 224 * 3 + 64
    assert ahead_bytes(cfg, image_index(256), 512) == 2 * 512 * per_row  # about 154 MB for ImageNet crops
    small = load_config(None, ["preprocess.augment={on: worker, ops: []}"])
    assert ahead_bytes(small, image_index(8, 1), 512) == AHEAD_FLOOR_BYTES  # digits: the floor
