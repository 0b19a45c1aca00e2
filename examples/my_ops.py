"""Augmentation ops of your own for `op: "my_ops:Posterize"` and `op: "my_ops:CenterCrop"`.

Each op class owns its parameters (`Params`, a pydantic model: the YAML keys beside `op`
are validated by it) and declares its output shape (`output_shape`), as FFCV's transforms
do; `__call__` works on a uint8 N x H x W x C numpy batch with one uint64 key per image,
and draws its randomness from the keys only (echoray.data.uniform), so a sample's
augmentation is the same on a CPU actor or a worker (preprocess.augment.on: cpu | worker).
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from echoray.data import uniform


class Posterize:
    """Keep the top `bits` bits of every pixel, on each image with probability p."""

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        bits: int = Field(4, ge=1, le=8)
        p: float = Field(0.5, ge=0.0, le=1.0)

    def __init__(self, params: Params):
        self.mask = np.uint8((0xFF << (8 - params.bits)) & 0xFF)
        self.p = params.p

    def __call__(self, images: np.ndarray, keys: np.ndarray) -> np.ndarray:
        chosen = uniform(keys, 0) < self.p
        return np.where(chosen[:, None, None, None], images & self.mask, images)


class CenterCrop:
    """The central size x size pixels (no randomness): changes the shape the model sees."""

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        size: int = Field(ge=1)

    def __init__(self, params: Params):
        self.size = params.size

    def output_shape(self, height: int, width: int) -> tuple[int, int]:
        if self.size > min(height, width):
            raise ValueError(f"CenterCrop size {self.size} exceeds the {height} x {width} image")
        return self.size, self.size

    def __call__(self, images: np.ndarray, keys: np.ndarray) -> np.ndarray:
        _, h, w, _ = images.shape
        top, left = (h - self.size) // 2, (w - self.size) // 2
        return np.ascontiguousarray(images[:, top:top + self.size, left:left + self.size])
