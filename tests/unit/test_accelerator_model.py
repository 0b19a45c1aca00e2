"""benchmarks/accelerator_model.py: the emulated accelerator reached through echoray's own
model factory contract (model.name by import path, model.kwargs), its step lasting the set
time in both forms, its busy log read back exactly."""

import time

import pytest
import torch

from echoray.config_load import load_config
from echoray.train.models import build_model
from helpers import load_benchmark

acc = load_benchmark("accelerator_model")


def built(tmp_path, **kwargs):
    kw = ", ".join(f'"{k}": {v!r}' if not isinstance(v, str) else f'"{k}": "{v}"' for k, v in kwargs.items())
    cfg = load_config(None, ["model.name=accelerator_model:factory", f"model.kwargs={{{kw}}}"])
    return build_model(cfg.model, 3, 10, 64)


def train_step(model, x, y, opt):
    opt.zero_grad()
    t0 = time.perf_counter()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    return time.perf_counter() - t0


@pytest.mark.parametrize("form", ["wait", "padded"])
def test_a_step_lasts_the_set_time_and_is_logged(tmp_path, form):
    model = built(tmp_path, us_per_sample=500, form=form, busy_log=str(tmp_path / "busy"))
    assert isinstance(model, acc.EmulatedAccelerator) and model.form == form
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 3, 64, 64), torch.randint(0, 10, (32,))
    took = [train_step(model, x, y, opt) for _ in range(3)]
    assert min(took) >= 32 * 500e-6  # 16 ms per step of 32 samples, at least
    model.eval()
    with torch.no_grad():
        model(x[:12])
    procs = acc.read_busy(tmp_path / "busy")
    assert len(procs) == 1
    train, evals = procs[0]["train"], procs[0]["eval"]
    assert [n for *_, n in train] == [32, 32, 32] and [n for *_, n in evals] == [12]
    assert all(b - a >= 32 * 500e-6 for a, b, _ in train)
    assert evals[0][1] - evals[0][0] >= 12 * 500e-6 / 3
    if form == "wait":  # the padded form's real compute may overrun on a loaded machine
        assert model.overruns == 0


def test_busy_fraction_is_time_in_steps_over_the_span_with_evaluation_apart():
    proc = {"train": [(10.0, 11.0, 8), (12.0, 13.0, 8), (15.0, 16.0, 8)], "eval": [(13.0, 14.0, 4), (20.0, 21.0, 4)]}
    b = acc.busy_fraction(proc)
    assert b["steps"] == 3 and b["samples"] == 24 and b["span_s"] == 6.0 and b["step_s"] == 3.0
    assert b["eval_s"] == 1.0  # the evaluation after the last step is outside the span
    assert b["busy_raw"] == pytest.approx(0.5) and b["busy"] == pytest.approx(3 / 5)


def test_padded_form_learns_classes_apart():
    torch.manual_seed(0)
    model = acc.factory(num_classes=4, input_shape=(3, 64, 64), us_per_sample=0, form="padded")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    tints = torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [-1.0, -1.0, -1.0]])
    for _ in range(60):
        y = torch.randint(0, 4, (32,))
        train_step(model, torch.randn(32, 3, 64, 64) * 0.5 + tints[y][:, :, None, None], y, opt)
    model.eval()
    y = torch.arange(4).repeat(16)
    with torch.no_grad():
        pred = model(torch.randn(64, 3, 64, 64) * 0.5 + tints[y][:, :, None, None]).argmax(1)
    assert (pred == y).float().mean() >= 0.95


def test_bad_kwargs_name_the_key():
    with pytest.raises(ValueError, match="model.kwargs.form 'fast'"):
        acc.factory(num_classes=2, input_shape=(3, 8, 8), form="fast")
    with pytest.raises(ValueError, match="us_per_sample -1"):
        acc.factory(num_classes=2, input_shape=(3, 8, 8), us_per_sample=-1)
