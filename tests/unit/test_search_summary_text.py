"""What `echoray tune` prints at its end names its objective, or says there is none."""

import pytest

from echoray.tune.summary_text import print_search


def _summary(value):
    return {
        "target": {"metric": "accuracy", "value": value, "direction": "higher is better"},
        "repeats": [{"repeat": 0, "best": None, "reached": 0, "trials": 2, "errors": 0}],
        "fresh_examples_to_target": {"n": 0},
        "search_dir": "runs/s", "mlflow_parent_run_id": "abc", "mlflow_tracking_uri": "sqlite:///m.db",
    }


@pytest.mark.parametrize(("value", "line"), [
    (0.97, "[echoray] objective: fewest fresh examples to reach accuracy >= 0.97"),
    (None, "[echoray] objective: none (train.target is null): no trial can reach a target, none is best"),
])
def test_the_objective_line_names_the_target_or_its_absence(capsys, value, line):
    print_search(_summary(value))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == line
    assert out[1] == "[echoray] repeat 0: no trial reached the target (0/2 reached, 0 failed)"
