"""`echoray train --resume RUN --set KEY=VALUE`: a resume may change where the rest of the
run is placed and how long the driver waits (recovery/resume.py CHANGEABLE_ON_RESUME), for this
resume only; any other key is refused naming it, exit 2, before anything is written or
started (the run folder as it was, no MLflow store opened)."""

import pytest

from echoray.cli import main
from echoray.config_load import ConfigError, load_config, to_yaml
from echoray.recovery.resume import open_run, write_run_state


@pytest.fixture
def run(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "config.yaml").write_text(to_yaml(load_config(None, ["scaling.num_workers=2"])))
    write_run_state(d, mlflow_run_id="r1", tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", pipeline="p",
                    started_at=0.0, storage=str(d / "ray"))
    return d


def test_placement_and_timeouts_may_change_for_this_resume(run):
    before = (run / "config.yaml").read_text()
    cfg, resume = open_run(str(run), ["preprocess.actors.max_size=3", "preprocess.actors.min_size=2",
                                      "train.stall_timeout_s=30", "scaling.resources_per_worker={gpu_node: 1}"])
    assert (cfg.preprocess.actors.min_size, cfg.preprocess.actors.max_size) == (2, 3)
    assert cfg.train.stall_timeout_s == 30 and cfg.scaling.resources_per_worker == {"gpu_node": 1}
    assert resume.changed == {"preprocess.actors.max_size": ["1", "3"], "preprocess.actors.min_size": ["1", "2"],
                              "scaling.resources_per_worker": ["{}", "(unset)"],
                              "scaling.resources_per_worker.gpu_node": ["(unset)", "1.0"],
                              "train.stall_timeout_s": ["180.0", "30.0"]}
    assert cfg.tracking.uri == resume.tracking_uri  # still the run's own store
    assert (run / "config.yaml").read_text() == before  # the run's config as it started
    _, plain = open_run(str(run))
    assert plain.changed == {}


@pytest.mark.parametrize("assignment, key, why", [
    ("scaling.num_workers=1", "scaling.num_workers", "the steps of an epoch and the learning-rate schedule"),
    ("seed=7", "seed", "it decides the run's samples, steps or model"),
    ("echo.factor=2", "echo.factor", "it decides the run's samples"),
    ("train.batch_size=32", "train.batch_size", "it decides the run's samples"),
])
def test_what_decides_samples_steps_or_model_is_refused_naming_the_key(run, assignment, key, why):
    with pytest.raises(ConfigError) as err:
        open_run(str(run), [assignment])
    message = str(err.value)
    assert message.startswith(f"--resume {run}: {key} cannot change on resume") and why in message
    assert "a resume may change: preprocess.actors, scaling.cpus_per_worker" in message


def test_the_cli_refuses_with_exit_2_before_anything_starts(run, tmp_path, monkeypatch, capsys):
    before = {p.name: p.read_text() for p in run.iterdir()}
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--resume", str(run), "--set", "scaling.num_workers=4"]) == 2
    err = capsys.readouterr().err
    assert "scaling.num_workers cannot change on resume" in err and "the run has 2, --set gives 4" in err
    assert {p.name: p.read_text() for p in run.iterdir()} == before and not (tmp_path / "mlflow.db").exists()
    # a bad value of a key that may change is named as any --set is
    assert main(["train", "--resume", str(run), "--set", "preprocess.actors.max_size=0"]) == 2
    assert "preprocess.actors.max_size" in capsys.readouterr().err
