"""Augmentation ops of the user's own by import path: `op: "package.module:MyOp"`.

The protocol (FFCV's transforms in small: the op owns its parameters and says what it
does to the shape):

    class Posterize:
        class Params(pydantic.BaseModel):   # or a dataclass; omit it for an op without keys
            bits: int = 4

        def __init__(self, params: Params): ...          # __init__(self) without Params

        def output_shape(self, height: int, width: int) -> tuple[int, int]:
            '''Optional (default: unchanged). Ops keep the channels; echoray trains square images.'''

        def __call__(self, images: np.ndarray, keys: np.ndarray) -> np.ndarray:
            '''uint8 N x H x W x C -> uint8 N x H' x W' x C. keys: one uint64 per image, this
            op's own stream of the sample's augmentation key; draw from them only
            (echoray.data.uniform(keys, component)), so an image's augmentation is a pure
            function of its key on any actor, worker or device, as for the built-in ops.'''

        def apply_torch(self, images: torch.Tensor, keys: np.ndarray) -> torch.Tensor:
            '''Optional: the same on a torch uint8 tensor on the training device
            (preprocess.augment.on: worker); without it the worker applies __call__ on the CPU.'''

In the YAML the op's keys sit beside `op`, like a built-in op's:
`ops: [{op: "my_ops:Posterize", bits: 3}, {op: flip}]`. Their validation is the op's Params.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from echoray.config import AugmentOp
from echoray.plugins import is_import_path, load_object, op_params
from echoray.seeds import mix

_INSTANCES: dict[tuple[str, str], Any] = {}


def is_custom(op: AugmentOp) -> bool:
    return is_import_path(op.op)


def instance(op: AugmentOp) -> Any:
    """The op object for an AugmentOp by import path (made once per process and parameters)."""
    key = (op.op, json.dumps(op.params, sort_keys=True, default=str))
    if key not in _INSTANCES:
        cls = load_object(op.op, "op")
        params = op_params(cls, op.params, "op", op.op)
        _INSTANCES[key] = cls() if params is None else cls(params)
    return _INSTANCES[key]


def output_side(op: AugmentOp, side: int) -> int:
    """The image side after the op (its output_shape; square images only)."""
    declare = getattr(instance(op), "output_shape", None)
    if declare is None:
        return side
    h, w = (int(v) for v in declare(side, side))
    if h != w or h < 1:
        raise ValueError(f"op {op.op!r}: output_shape({side}, {side}) = ({h}, {w}); echoray trains square images")
    return h


def _checked(op: AugmentOp, x_in_shape: tuple, out_shape: tuple) -> None:
    n, h, w, c = x_in_shape
    side = output_side(op, h)
    if tuple(out_shape) != (n, side, side, c):
        raise ValueError(f"op {op.op!r}: returned shape {tuple(out_shape)} for input {tuple(x_in_shape)}, "
                         f"but its output_shape declares {(n, side, side, c)}")


def apply_numpy(x: np.ndarray, keys: np.ndarray, i: int, op: AugmentOp) -> np.ndarray:
    """Op i of a list on a uint8 NHWC array, with stream i of every sample's key."""
    out = np.asarray(instance(op)(x, mix(keys, i)))
    if out.dtype != np.uint8:
        raise ValueError(f"op {op.op!r}: returned {out.dtype} images, want uint8")
    _checked(op, x.shape, out.shape)
    return out


def apply_torch(x, keys: np.ndarray, i: int, op: AugmentOp):
    """apply_numpy on a torch uint8 tensor: the op's apply_torch if it has one, else its
    numpy __call__ on the CPU and back to x's device."""
    import torch

    obj = instance(op)
    if hasattr(obj, "apply_torch"):
        out = obj.apply_torch(x, mix(keys, i))
        if out.dtype != torch.uint8:
            raise ValueError(f"op {op.op!r}: apply_torch returned {out.dtype} images, want torch.uint8")
        _checked(op, tuple(x.shape), tuple(out.shape))
        return out
    return torch.from_numpy(np.ascontiguousarray(apply_numpy(x.cpu().numpy(), keys, i, op))).to(x.device)
