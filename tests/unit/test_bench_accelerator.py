"""benchmarks/accelerator.py's run plan and loop profile: every worker count's run fits the
2-CPU machine it is measured on (the workers share one half CPU), and the loop's time splits
into shares that add up to its length."""

import argparse

import pytest

from echoray.config_load import load_config
from echoray.runtime.resources import plan_resources
from helpers import load_benchmark

acc = load_benchmark("accelerator")
ARGS = argparse.Namespace(target=None, epochs=8, form="wait", queue_steps=1, evals_per_epoch=1)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("arm", ["e1", "after_augment_e4", "batch_auto"])
def test_every_run_fits_two_cpus_with_the_workers_sharing_half_of_one(tmp_path, workers, arm):
    cfg = load_config(None, acc.run_overrides(arm, "R3", workers, tmp_path, ARGS, 0, str(tmp_path)))
    plan = plan_resources(cfg, use_gpu=False)
    assert plan.num_workers == workers
    assert plan.per_worker["CPU"] * workers == pytest.approx(acc.WORKER_CPUS)
    assert plan.demand()["CPU"] == pytest.approx(2.0)


def test_loop_profile_shares_add_up_to_the_loop():
    p = acc.loop_profile({"train_loop_s": 10.0, "input_wait_s": 6.0, "step_s": 3.0, "eval_s": 0.5})
    assert p["other_s"] == pytest.approx(0.5)
    assert sum(p[k] for k in ("step_share", "input_wait_share", "eval_share", "other_share")) == pytest.approx(1.0)
    assert p["input_wait_share"] == pytest.approx(0.6)


def test_loop_profile_is_empty_for_a_summary_without_the_loop_times():
    assert acc.loop_profile({"train_loop_s": 10.0, "eval_s": 1.0}) == {}
    assert acc.loop_medians([{"loop": {}}, {}]) == {}


def test_loop_medians_take_each_share_over_the_runs():
    runs = [{"loop": acc.loop_profile({"train_loop_s": 10.0, "input_wait_s": w, "step_s": 2.0, "eval_s": 0.0})}
            for w in (1.0, 5.0, 3.0)]
    assert acc.loop_medians(runs)["loop_input_wait_share"] == pytest.approx(0.3)


def test_run_cpu_takes_the_worst_runs_and_the_median_own_cores():
    runs = [{"busy_cores_before": b, "cpu": {"own_cores": o, "foreign_cpu_share": f}}
            for b, o, f in ((0.02, 1.9, 0.004), (0.11, 1.95, 0.012), (0.05, 1.7, 0.001))]
    assert acc.run_cpu(runs) == {"busy_cores_before_max": 0.11, "foreign_cpu_share_max": 0.012,
                                 "own_cores_median": 1.9}
