"""The CPU path of the prepared GPU benchmark (benchmarks/gpu_step.py --tiny): it runs
the platform end to end and reports every figure (the GPU ones as None on CPU)."""

import importlib.util
import json

from helpers import REPO


def test_gpu_step_tiny_runs_on_cpu_and_reports_each_case(local_ray, tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_step", REPO / "benchmarks" / "gpu_step.py")
    gpu_step = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_step)
    out = gpu_step.main(["--tiny", "--out", str(tmp_path / "gpu_step.json")])
    cases = json.loads(out.read_text())["cases"]
    assert [(c["precision"], c["channels_last"], c["echo_factor"]) for c in cases] == [
        ("fp32", False, 1.0), ("bf16", True, "auto")]
    for c in cases:
        assert c["device"] == "cpu" and c["peak_gpu_mib"] is None and c["gpu_busy_fraction"] is None
        assert c["examples_per_s"] > 0 and c["steps"] > 0 and 0.0 <= c["accuracy"] <= 1.0
