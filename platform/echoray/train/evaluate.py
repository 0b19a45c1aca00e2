"""Held-out evaluation: each worker scores its share of the eval split, then all-reduce.

Each worker reads and decodes its share once per run (data/held_out.py HeldOutReader)
and keeps the uint8 centre crops for every later epoch while they fit the cache bound,
so evaluating restarts no Ray Data pipeline and decodes nothing after the first epoch;
a larger share is re-read in chunks at each evaluation.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from echoray.data.held_out import HeldOutReader
from echoray.data.sources import SourceIndex


class Normalizer:
    """uint8 NHWC -> float NCHW, (x/255 - mean) / std, on the training device."""

    def __init__(self, mean: list[float] | None, std: list[float] | None, channels: int, device,
                 memory_format=None):
        mean = mean or [0.5] * channels
        std = std or [0.25] * channels
        if len(mean) != channels or len(std) != channels:
            raise ValueError(f"preprocess.mean/std need {channels} values (one per channel)")
        self.mean = torch.tensor(mean, device=device).view(1, -1, 1, 1)
        self.std = torch.tensor(std, device=device).view(1, -1, 1, 1)
        self.device = device
        self.memory_format = memory_format or torch.contiguous_format  # the model's (train.channels_last)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        # The layout is set on the uint8 tensor (a quarter of the bytes) and the arithmetic is
        # done in place on the one float tensor: the same operations in the same order as
        # (x / 255 - mean) / std, so the same floats, with one float tensor made instead of
        # three or four.
        x = images.to(self.device, non_blocking=True).permute(0, 3, 1, 2)
        x = x.contiguous(memory_format=self.memory_format).float()
        return x.div_(255.0).sub_(self.mean).div_(self.std)


class EvalSet:
    """`tta`: (seed, K, ops) to also score predictions averaged over K augmented views
    (cutout is left out at test time: it only removes information)."""

    def __init__(self, idx: SourceIndex, rank: int, world: int, out_size: int, tta=None):
        self.source = HeldOutReader(idx, rank, world, out_size)
        self.tta = None
        if tta is not None:
            seed, views, ops = tta
            self.tta = (seed, views, [op for op in ops if op.op != "cutout"])
        decoded = self.source.decode()
        self.cached = None if decoded is None else list(decoded.chunks)
        self.bad = dict(decoded.bad) if decoded is not None else {}

    @property
    def reader(self):
        """The source reader of this share."""
        return self.source.reader

    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module, normalize: Normalizer, batch_size: int) -> tuple[int, int, int]:
        """(correct, total, correct with test-time augmentation) over all workers."""
        was_training = model.training
        model.eval()
        correct = total = tta_correct = 0
        for chunk in self.cached if self.cached is not None else self.source.chunks():
            images, labels, ids = torch.from_numpy(chunk[0]), torch.from_numpy(chunk[1]), chunk[2]
            for s in range(0, len(labels), batch_size):
                x = images[s : s + batch_size]
                logits = model(normalize(x))
                y = labels[s : s + batch_size].to(logits.device)
                correct += int((logits.argmax(1) == y).sum())
                total += len(y)
                if self.tta is not None:
                    tta_correct += int((self._tta_predict(model, normalize, x, ids[s : s + batch_size]) == y).sum())
        model.train(was_training)
        return tuple(all_reduce_ints([correct, total, tta_correct]))

    def _tta_predict(self, model, normalize, images: torch.Tensor, ids: np.ndarray) -> torch.Tensor:
        return tta_predict(model, normalize, images, ids, *self.tta)


def tta_predict(model, normalize, images: torch.Tensor, ids: np.ndarray, seed: int, views: int, ops) -> torch.Tensor:
    """Class per image from softmax probabilities averaged over `views` augmented views
    (view v of sample i keyed by H(seed, AUGMENT, -1, id_i, 0, 0, v); rows view-major)."""
    from echoray.train.batch_augment import eval_view_keys, make_views

    x = make_views(images.to(normalize.device), eval_view_keys(seed, ids, views), views, ops)
    probs = torch.softmax(model(normalize(x)), dim=1)
    return probs.view(views, len(ids), -1).mean(0).argmax(1)


def all_reduce_ints(values: list[int]) -> list[int]:
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return list(values)
    backend = dist.get_backend()
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else "cpu"
    t = torch.tensor(np.asarray(values, dtype=np.int64), device=device)
    dist.all_reduce(t)
    return [int(v) for v in t.cpu()]
