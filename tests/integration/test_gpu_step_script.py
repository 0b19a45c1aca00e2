"""The CPU path of the prepared GPU benchmark (benchmarks/gpu_step.py --tiny): it runs the
platform end to end on generated CIFAR-format data (2 x 100 train, 100 test images) and
reports every figure (the GPU ones as None on CPU), each consistent with the run's counts."""

import json

import pytest

from helpers import load_benchmark

TRAIN, TEST, BATCH = 200, 100, 128  # make_data(tiny=True); cifar10_resnet32.yaml's train.batch_size


def test_gpu_step_tiny_runs_on_cpu_and_reports_each_case(local_ray, tmp_path):
    gpu_step = load_benchmark("gpu_step")
    out = gpu_step.main(["--tiny", "--out", str(tmp_path / "gpu_step.json")])
    record = json.loads(out.read_text())
    cases = record["cases"]
    assert [c["case"] for c in cases] == ["cifar_resnet32-fp32-e1", "cifar_resnet32-bf16+channels_last-eauto"]
    assert [(c["precision"], c["channels_last"], c["echo_factor"]) for c in cases] == [
        ("fp32", False, 1.0), ("bf16", True, "auto")]
    for c in cases:
        assert c["device"] == "cpu" and c["peak_gpu_mib"] is None and c["gpu_busy_fraction"] is None
        assert c["batch_size"] == BATCH and c["workers"] == 1 and c["evaluations"] == 1  # --tiny: one epoch
        # passes of fresh data (echoray/epochs.py): whole batches only, so less than one pass
        assert c["epochs"] == pytest.approx(c["fresh_examples"] / TRAIN, abs=1e-4) and c["epochs"] <= 1
        # whole batches only (the packer drops the tail, as drop_last): trained = steps x B
        assert c["trained_examples"] == c["steps"] * BATCH and c["steps"] >= 1
        assert 0 < c["fresh_examples"] <= TRAIN  # one epoch: each train image fresh at most once
        assert c["measured_echo_factor"] == pytest.approx(c["trained_examples"] / c["fresh_examples"])
        assert c["examples_per_s"] == pytest.approx(c["trained_examples"] / c["train_loop_s"])
        assert c["fresh_examples_per_s"] == pytest.approx(c["fresh_examples"] / c["train_loop_s"])
        assert (c["accuracy"] * TEST) == pytest.approx(round(c["accuracy"] * TEST))  # scored on the 100 test images
    plain, auto = cases
    # echo 1: every trained example is a fresh one, one batch of 128 from the 200 images
    assert plain["steps"] == TRAIN // BATCH and plain["fresh_examples"] == plain["trained_examples"] == BATCH
    assert plain["final_echo_factor"] in (None, 1.0) and plain["measured_echo_factor"] == 1.0
    assert 1.0 <= auto["final_echo_factor"] <= 4.0  # echo.max_factor=4
    assert auto["trained_examples"] <= 4 * auto["fresh_examples"]
    # the recorded form benchmarks/report.py reads (benchmarks/common.py's save)
    assert set(record["load_avg"]) >= {"start", "end"} and record["provenance"]["commit"]
    assert record["provenance"]["args"]["tiny"] is True
