"""An emulated accelerator, as a model by import path (nothing in the product knows of it).

A GPU step is time the CPU does not spend: the kernels run elsewhere while the host waits.
So an accelerator of known speed is a model whose training step takes a set time per
sample, spent waiting (time.sleep releases the GIL and the core):

    model: {name: "accelerator_model:factory",
            kwargs: {us_per_sample: 405, form: wait, busy_log: /tmp/busy}}

- form "wait" (a): forward sleeps us_per_sample * batch; a tiny trainable layer (logits
  from each image's corner pixel) keeps the optimizer, DDP and the loss working.
- form "padded" (b): a real small network (a 2-conv CNN on the image subsampled to
  `side` x `side`) learns; its step (forward + backward, timed with perf_counter from the
  forward's start) is padded with a sleep up to the set time, so time to target is real.
  The real compute runs on this CPU: it must fit the set time (`overruns` counts the
  steps that did not).

queue_steps (form "wait"): 0, the step is synchronous (the host waits for its end); n >= 1,
the step is queued as on a GPU stream and the host waits only until the device has started
the step n - 1 before it (echoray reads the loss once per evaluation, so a real GPU step
is asynchronous): the host's own work per step (backward bookkeeping, the optimizer call,
the loop's counters) overlaps the device's step instead of adding to it.

Evaluation (model.eval()) waits `eval_share` of the per-sample time (a forward pass is
about a third of a training step) and is logged apart.

Speeds (docs/benchmarks/accelerator.md): NVIDIA DeepLearningExamples ResNet-50 v1.5 AMP on
one A100 trains 2,470 images/s = 405 us per sample (scale 1, R about 3 for this machine's
JPEG pipeline); 202 us is scale 2 (about one H100, R about 6). `SETTINGS` names them.

busy_log (a folder): every process appends one line per step or evaluation batch to
busy_log/busy-<pid>.txt, "train|eval <start> <end> <samples>" in time.time() seconds, so a
benchmark reads the accelerator's own busy time back (read_busy, busy_fraction).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
from torch import nn

A100_RN50_AMP_IMAGES_PER_S = 2470.0  # NVIDIA DeepLearningExamples, PyTorch RN50 v1.5, 1x A100 AMP
SETTINGS = {  # name: (scale of the A100 rate, us per sample)
    "R3": (1.0, round(1e6 / A100_RN50_AMP_IMAGES_PER_S)),
    "R6": (2.0, round(1e6 / (2 * A100_RN50_AMP_IMAGES_PER_S))),
}
FORMS = ("wait", "padded")


class BusyLog:
    """Appends "kind start end samples" lines (wall-clock seconds) to busy_log/busy-<pid>.txt."""

    def __init__(self, folder: str | None):
        self.folder = folder
        self._fh = None
        self._wall0 = time.time() - time.perf_counter()  # perf_counter -> wall clock

    def add(self, kind: str, t0: float, t1: float, samples: int) -> None:
        if self.folder is None:
            return
        if self._fh is None or self._fh_pid != os.getpid():
            Path(self.folder).mkdir(parents=True, exist_ok=True)
            self._fh = open(Path(self.folder) / f"busy-{os.getpid()}.txt", "a", buffering=1)  # noqa: SIM115
            self._fh_pid = os.getpid()
        self._fh.write(f"{kind} {self._wall0 + t0:.6f} {self._wall0 + t1:.6f} {samples}\n")

    def __getstate__(self):  # a model is pickled into checkpoints and Ray tasks: no file handle
        return {"folder": self.folder, "_fh": None, "_wall0": self._wall0}


def wait_until(deadline: float) -> float:
    """Sleep until perf_counter() reaches `deadline`; returns the time it ended."""
    left = deadline - time.perf_counter()
    if left > 0:
        time.sleep(left)
    return time.perf_counter()


class _PadStep(torch.autograd.Function):
    """Identity on x; its backward, the last of the step (it is the forward's first op), waits
    until the step's set end. `anchor` is a trainable scalar so that backward runs."""

    @staticmethod
    def forward(ctx, x, anchor, acc):
        ctx.acc = acc
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        ctx.acc.end_step()
        return grad, torch.zeros_like(ctx.acc.anchor), None


class EmulatedAccelerator(nn.Module):
    """See the module docstring. forward(x: N x C x H x W float) -> N x num_classes logits."""

    def __init__(self, num_classes: int, channels: int, us_per_sample: float, form: str = "wait",
                 busy_log: str | None = None, eval_share: float = 1 / 3, side: int = 16, width: int = 8,
                 queue_steps: int = 0):
        super().__init__()
        if form not in FORMS:
            raise ValueError(f"model.kwargs.form {form!r}: expected one of {', '.join(FORMS)}")
        if us_per_sample < 0:
            raise ValueError(f"model.kwargs.us_per_sample {us_per_sample}: must be >= 0")
        self.s_per_sample, self.form, self.eval_share, self.side = us_per_sample * 1e-6, form, eval_share, side
        self.log = BusyLog(busy_log)
        if queue_steps < 0 or (queue_steps and form != "wait"):
            raise ValueError(f"model.kwargs.queue_steps {queue_steps}: 0, or >= 1 with form 'wait'")
        self.queue_steps, self._free_at = queue_steps, 0.0
        self.overruns = 0
        self._t0 = self._deadline = 0.0
        self._n = 0
        self.anchor = nn.Parameter(torch.zeros(()))
        if form == "wait":
            self.head = nn.Linear(channels, num_classes)
        else:
            self.net = nn.Sequential(
                nn.Conv2d(channels, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                nn.MaxPool2d(2), nn.Conv2d(width, 2 * width, 3, padding=1, bias=False), nn.BatchNorm2d(2 * width),
                nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * width, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t0, n = time.perf_counter(), len(x)
        training = self.training and torch.is_grad_enabled()
        share = 1.0 if training else self.eval_share
        self._t0, self._n, self._deadline = t0, n, t0 + share * self.s_per_sample * n
        if self.form == "wait":
            out = self.head(x[:, :, 0, 0].float()) + self.anchor
            if self.queue_steps:
                self._enqueue("train" if training else "eval", share * self.s_per_sample * n)
            else:
                self._finish("train" if training else "eval")
            return out
        step = max(1, x.shape[-1] // self.side)
        small = x[:, :, ::step, ::step]
        if training:
            small = _PadStep.apply(small, self.anchor, self)
            return self.net(small)
        out = self.net(small) + self.anchor
        self._finish("eval")
        return out

    def end_step(self) -> None:
        """The padded form's backward reached the step's start: pad up to the set time."""
        self._finish("train")

    def _enqueue(self, kind: str, d: float) -> None:
        """Asynchronous form (queue_steps >= 1), as a GPU stream: the step starts on the device
        when the device is free, and the host goes on once the device has started the step
        queue_steps - 1 steps before it (1: the host prepares the next step while the device
        runs this one). The log holds the device's intervals."""
        start = max(time.perf_counter(), self._free_at)
        self._free_at = start + d
        self.log.add(kind, start, self._free_at, self._n)
        wait_until(self._free_at - self.queue_steps * d)

    def _finish(self, kind: str) -> None:
        if time.perf_counter() > self._deadline:
            self.overruns += 1
        self.log.add(kind, self._t0, wait_until(self._deadline), self._n)


def factory(num_classes: int, input_shape: tuple, us_per_sample: float = SETTINGS["R3"][1], form: str = "wait",
            busy_log: str | None = None, eval_share: float = 1 / 3, side: int = 16,
            width: int = 8, queue_steps: int = 0) -> EmulatedAccelerator:
    """echoray's model factory contract (echoray.train.models.build_model)."""
    return EmulatedAccelerator(num_classes, input_shape[0], us_per_sample, form, busy_log, eval_share, side, width,
                               queue_steps)


# --- reading the log back (the benchmark's side) ---

def read_busy(folder: str | Path) -> list[dict]:
    """One dict per process that logged: its train and eval intervals as (start, end, samples)."""
    out = []
    for path in sorted(Path(folder).glob("busy-*.txt")):
        rows = {"train": [], "eval": []}
        for line in path.read_text().splitlines():
            kind, a, b, n = line.split()
            rows[kind].append((float(a), float(b), int(n)))
        if rows["train"]:
            out.append({"pid": int(path.stem.split("-")[1]), **rows})
    return out


def busy_fraction(proc: dict) -> dict:
    """The accelerator's own figures for one process: time in training steps over the time
    from its first step's start to its last step's end (`busy_raw`), and the same with
    evaluation inside that span taken out of it (`busy`: evaluation is accelerator work, not
    a wait for input)."""
    train, evals = proc["train"], proc["eval"]
    first, last = train[0][0], train[-1][1]
    in_steps = sum(b - a for a, b, _ in train)
    in_eval = sum(b - a for a, b, _ in evals if a >= first and b <= last)
    span = last - first
    return {"steps": len(train), "samples": sum(n for *_, n in train), "span_s": span, "step_s": in_steps,
            "eval_s": in_eval, "busy_raw": in_steps / span if span > 0 else 1.0,
            "busy": in_steps / (span - in_eval) if span > in_eval else 1.0}
