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
torch.set_num_threads(1)


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


@pytest.mark.parametrize("queue_steps", [0, 1])
def test_a_queued_step_overlaps_the_hosts_work_as_on_a_gpu_stream(tmp_path, queue_steps):
    """Host work between steps (3 ms, standing for the loop's bookkeeping) idles a
    synchronous accelerator; queued one step ahead, the device runs its steps back to back."""
    model = acc.factory(num_classes=10, input_shape=(3, 8, 8), us_per_sample=5000, busy_log=str(tmp_path),
                        queue_steps=queue_steps)  # 160 ms steps: a loaded machine's delays stay under them
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 3, 8, 8), torch.randint(0, 10, (32,))
    for _ in range(8):
        train_step(model, x, y, opt)
        time.sleep(0.003)
    (proc,) = acc.read_busy(tmp_path)
    busy = acc.busy_fraction(proc)
    assert busy["steps"] == 8 and busy["step_s"] >= 8 * 0.16 - 1e-5  # the log keeps microseconds
    if queue_steps:
        assert busy["step_s"] == pytest.approx(8 * 0.16, abs=1e-5)  # device time: exactly the set time
        assert busy["busy"] > 0.99  # each step starts where the one before ended
    else:
        assert busy["busy"] < 160 / 163


def test_queue_steps_is_for_the_wait_form():
    with pytest.raises(ValueError, match="queue_steps 1"):
        acc.factory(num_classes=2, input_shape=(3, 8, 8), form="padded", queue_steps=1)


def test_the_gpu_loop_checks_arms_run_the_same_steps_on_the_cpu_path():
    """benchmarks/accelerator_gpu.py's arm on the CPU (its --tiny path, digits here): the
    overlapped and the serial loop train the same batches; no GPU, no GPU figure."""
    from echoray.data.sources import index_source

    gpu = load_benchmark("accelerator_gpu")
    cfg = load_config(None, ["train.target=null", "train.max_epochs=1", "train.checkpoint_every=0", "source.limit=256",
                             "train.batch_size=32", "model.width=8"])
    idx = index_source(cfg.source)
    batches = gpu.in_memory(cfg, idx)
    arms = [gpu.one_arm(cfg, idx, batches, la, "cpu") for la in (1, 0)]
    assert [a["lookahead"] for a in arms] == [1, 0]
    assert arms[0]["steps"] == arms[1]["steps"] == len(batches) > 0
    assert all(a["steps_per_s"] > 0 and a["gpu_busy_fraction"] is None for a in arms)
