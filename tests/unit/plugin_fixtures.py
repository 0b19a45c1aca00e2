"""Wrong and right extension objects for test_extensions.py (importable: tests/unit is on
sys.path under pytest's default import mode)."""

from dataclasses import dataclass

import numpy as np

from echoray.data import SourceIndex


def no_input_shape(num_classes):
    return None


def returns_int(num_classes, input_shape):
    return 3


def linear(num_classes, input_shape, bias=True):
    import math

    from torch import nn

    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes, bias=bias))


NOT_CALLABLE = 42


class NoRead:
    @staticmethod
    def index(cfg):
        return None


class IndexTakesNothing:
    @staticmethod
    def index():
        return None

    def read(self, ids, split):
        return None


class ReturnsDict:
    @staticmethod
    def index(cfg):
        return {"train_ids": [0]}

    def __init__(self, idx):
        pass

    def read(self, ids, split):
        return None


class Constant:
    """n images of 4x4x1 with pixel = id, label id % classes; options.bad: float images / bad labels."""

    @staticmethod
    def index(cfg):
        n = cfg.options.get("n", 10)
        return SourceIndex(kind="ignored", num_classes=3, train_ids=list(range(0, n - 2)),
                           eval_ids=[n - 2, n - 1], image_size=4, channels=1, details=dict(cfg.options))

    def __init__(self, idx):
        self.bad = idx.details.get("bad")

    def read(self, ids, split):
        images = np.broadcast_to(np.asarray(ids, np.uint8)[:, None, None, None], (len(ids), 4, 4, 1)).copy()
        labels = np.asarray(ids) % 3
        if self.bad == "float":
            images = images.astype(np.float32)
        if self.bad == "labels":
            labels = labels + 3
        return images, labels


class NoCall:
    pass


class NoParams:
    def __call__(self, images, keys):
        return images


@dataclass
class ShiftParams:
    amount: int = 1


class Shift:
    """Adds `amount` to every pixel (a dataclass Params; no randomness)."""

    Params = ShiftParams

    def __init__(self, params):
        self.amount = params.amount

    def __call__(self, images, keys):
        return (images.astype(np.int64) + self.amount).clip(0, 255).astype(np.uint8)


class LiesAboutShape:
    """Declares no shape change, then crops one row and column."""

    def __call__(self, images, keys):
        return images[:, 1:, 1:]


class KeyedInvert:
    """Inverts the images whose key's uniform is below 0.5; also on torch (apply_torch)."""

    def __call__(self, images, keys):
        from echoray.data import uniform

        return np.where((uniform(keys, 0) < 0.5)[:, None, None, None], 255 - images, images)

    def apply_torch(self, x, keys):
        import torch

        from echoray.data import uniform

        mask = torch.from_numpy(uniform(keys, 0) < 0.5).to(x.device)
        return torch.where(mask[:, None, None, None], 255 - x, x)
