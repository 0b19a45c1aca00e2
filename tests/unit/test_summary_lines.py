"""The run's console lines (messages.py): every figure named, "reached" said once, the
throughput line and what R is only where they mean something (an input-bound run,
echo.factor auto, --verbose)."""

import pytest

from echoray.messages import R_MEANS, epoch_line, print_summary


def summary(R: float, factor="1.0", reached=True) -> dict:
    return {
        "target_reached": reached, "stop_reason": "target reached" if reached else "max_epochs of data consumed",
        "metric": {"name": "accuracy", "target": 0.97, "value": 0.9712, "direction": "higher is better"},
        "best_metric": 0.9712, "fresh_examples": 2560, "trained_examples": 2560, "steps": 40, "epochs": 1.7778,
        "evaluations": 2,
        "echo": {"measured_factor": 1.0, "factor": factor, "final_factor": 2.5},
        "fresh_examples_to_target": 2560, "steps_to_target": 40, "time_to_target_s": 3.2,
        "time_to_first_step_s": 9.5, "wall_s": 14.0, "measured_R": R,
        "upstream_examples_per_s": 1000.0, "downstream_examples_per_s": 1000.0 * R,
        "run_dir": "/runs/digits-1", "mlflow_tracking_uri": "http://mlflow:5000", "mlflow_experiment_id": "1",
        "mlflow_run_id": "abc",
    }


def printed(capsys, s, **kw) -> list[str]:
    print_summary(s, **kw)
    return capsys.readouterr().out.splitlines()


def test_reached_is_said_once(capsys):
    lines = printed(capsys, summary(0.02))
    assert lines[0] == "[echoray] target accuracy >= 0.97: reached (final 0.9712, best 0.9712)"
    assert printed(capsys, summary(0.02, reached=False))[0] == (
        "[echoray] target accuracy >= 0.97: NOT reached (final 0.9712, best 0.9712; max_epochs of data consumed)")


@pytest.mark.parametrize("R, factor, verbose, shown", [
    (0.02, "1.0", False, False),  # not input-bound: the rates say nothing
    (0.02, "1.0", True, True),
    (3.5, "1.0", False, True),  # input-bound
    (0.9, "auto", False, True),  # auto follows R
])
def test_throughput_and_r_only_where_they_mean_something(capsys, R, factor, verbose, shown):
    lines = printed(capsys, summary(R, factor), verbose=verbose)
    throughput = [line for line in lines if "measured R" in line]
    assert bool(throughput) == shown and (f"[echoray] {R_MEANS}" in lines) == shown
    if shown:
        assert throughput[0].startswith(f"[echoray] throughput: upstream 1000 ex/s, downstream {1000 * R:.0f} ex/s, "
                                        f"measured R {R:.2f}")
        assert lines.index(f"[echoray] {R_MEANS}") == lines.index(throughput[0]) + 1


def test_every_column_of_the_epoch_line_is_named():
    line = epoch_line({"epoch": 2, "data_epochs": 1.7778, "step": 40, "loss": 0.1234, "accuracy": 0.9712,
                       "fresh_examples": 2560, "trained_examples": 2560, "lr": 0.05, "elapsed_s": 5.678})
    assert line == ("eval   2  epoch  1.78  step     40  loss 0.1234  acc 0.9712  fresh     2560  trained     2560  "
                    "lr 0.0500  training 5.7s")


def test_the_summary_line_says_epochs_in_passes_and_evaluations_apart(capsys):
    assert printed(capsys, summary(0.02))[1] == (
        "[echoray] fresh examples 2560, trained 2560 (measured echo factor 1.000), steps 40, epochs 1.78, "
        "evaluations 2")
