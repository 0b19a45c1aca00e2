"""The device side of a train step: mixed precision, memory format, host-to-device copies
and per-step values that stay on the device.

- precision: fp32 (none), bf16 (autocast; no scaler: bf16 has fp32's exponent range; runs
  on CPU too), fp16 (autocast + GradScaler; GPU only, refused before start otherwise).
- channels_last: NHWC weights and inputs, what cuDNN's tensor-core convolutions want.
- ToDevice: copies a numpy batch through pinned host buffers with non_blocking=True,
  so the host queues the copy and goes on (from pageable memory non_blocking is a
  synchronous copy); two buffers per field alternate, and a buffer is reused only
  after the copy that read it has finished (a CUDA event), never while it is read.
- LossMeter: the loss sum stays a device tensor; reading it is one sync per evaluation,
  not a float() (host sync) every step.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class Precision:
    def __init__(self, precision: str, device: torch.device):
        self.device = torch.device(device)
        self.name = precision
        if precision == "fp16" and self.device.type != "cuda":
            raise ValueError("train.precision: fp16 needs a GPU (use bf16 or fp32 on CPU)")
        self.dtype = DTYPES.get(precision)
        self.scaler = torch.amp.GradScaler(self.device.type) if precision == "fp16" else None

    def autocast(self):
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self, opt: torch.optim.Optimizer) -> None:
        if self.scaler is None:
            opt.step()
            return
        self.scaler.step(opt)  # skipped when the scaled gradients overflowed
        self.scaler.update()

    def state_dict(self) -> dict:
        return self.scaler.state_dict() if self.scaler is not None else {}

    def load_state_dict(self, state: dict) -> None:
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)


def memory_format(channels_last: bool) -> torch.memory_format:
    return torch.channels_last if channels_last else torch.contiguous_format


class ToDevice:
    """numpy -> device tensor; on CPU a zero-copy view, on GPU an asynchronous copy."""

    SLOTS = 2

    def __init__(self, device):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self._buffers: dict[str, list] = {}
        self._turn: dict[str, int] = {}

    def __call__(self, name: str, array: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(np.ascontiguousarray(array))
        if not self.cuda:
            return t
        slots = self._buffers.setdefault(name, [None] * self.SLOTS)
        i = self._turn[name] = (self._turn.get(name, -1) + 1) % self.SLOTS
        slot = slots[i]
        if slot is None or slot[0].shape != t.shape or slot[0].dtype != t.dtype:
            slot = slots[i] = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True), None]
        elif slot[1] is not None:
            slot[1].synchronize()  # the copy that read this buffer two batches ago is done
        slot[0].copy_(t)
        out = slot[0].to(self.device, non_blocking=True)
        slot[1] = torch.cuda.Event()
        slot[1].record()
        return out


class LossMeter:
    """Sum of per-step losses, kept on the device until an evaluation reads it."""

    def __init__(self):
        self.total: torch.Tensor | None = None
        self.n = 0

    def add(self, loss: torch.Tensor) -> None:
        loss = loss.detach().float()
        self.total = loss.clone() if self.total is None else self.total.add_(loss)
        self.n += 1

    def take_mean(self) -> float:
        """The mean since the last call (one host sync), then reset."""
        mean = float(self.total) / self.n if self.n else 0.0
        self.total, self.n = None, 0
        return mean
