"""What an augmentation list does to shapes, without torch.

data/stages.py needs `crops_full_image` at import time, and Ray unpickles the
preprocessing class in processes that never augment (Ray Train's controller, its
DatasetManager, Ray Data's SplitCoordinator). With these helpers in augment.py,
importing stages.py pulled in torch: 1.2 s of a 1.4 s import, paid three times
in a row before a run's first step (Ray timeline of `echoray train`,
docs/benchmarks/startup.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from echoray.config import AugmentOp


def crops_full_image(ops: Sequence[AugmentOp] | None) -> bool:
    """True when the first op is a random-resized crop: the actor then cuts it from the
    full decoded image (as the reference ResNet-50 pipeline does), see data/stages.py."""
    return bool(ops) and ops[0].op == "random_resized_crop"


def output_size(image_size: int, ops: Sequence[AugmentOp]) -> int:
    """Side length after the ops (only random_resized_crop changes it)."""
    for op in ops:
        if op.op == "random_resized_crop":
            image_size = op.size
    return image_size
