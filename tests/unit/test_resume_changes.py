"""`echoray train --resume RUN --set KEY=VALUE`: a resume may change where the rest of the
run is placed, by how many workers, and how long the driver waits (recovery/resume.py
CHANGEABLE_ON_RESUME), for this resume only; any other key is refused naming it, exit 2, before anything is written or
started (the run folder as it was, no MLflow store opened)."""

import json

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


def test_the_number_of_workers_may_change_for_this_resume(run):
    cfg, resume = open_run(str(run), ["scaling.num_workers=1"])
    assert cfg.scaling.num_workers == 1 and resume.changed == {"scaling.num_workers": ["2", "1"]}
    assert load_config(run / "config.yaml").scaling.num_workers == 2  # config.yaml as the run started


def test_a_worker_count_the_groups_do_not_divide_is_refused_naming_both_keys(tmp_path):
    d = tmp_path / "grouped"
    d.mkdir()
    (d / "config.yaml").write_text(to_yaml(load_config(None, [
        "scaling.num_workers=2", "batch_augmentation.copies=2", "batch_augmentation.mode=grouped",
        "preprocess.augment.on=worker"])))
    write_run_state(d, mlflow_run_id="r1", tracking_uri="sqlite:///x.db", pipeline="p", started_at=0.0,
                    storage=str(d / "ray"))
    assert open_run(str(d), ["scaling.num_workers=4"])[0].scaling.num_workers == 4  # two groups of 2
    with pytest.raises(ConfigError) as err:
        open_run(str(d), ["scaling.num_workers=3"])
    assert str(err.value).startswith(f"--resume {d}: ")
    assert "scaling.num_workers must be a multiple of batch_augmentation.copies" in str(err.value)


def test_a_run_trained_in_local_mode_keeps_its_one_worker(run):
    state = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**state, "trainer": "local_mode"}))
    with pytest.raises(ConfigError, match="scaling.num_workers cannot change on resume for this run: it "
                                          "trained in Ray Train's local mode"):
        open_run(str(run), ["scaling.num_workers=3"])


@pytest.mark.parametrize("assignment, key, why", [
    ("seed=7", "seed", "it decides the run's samples, steps or model"),
    ("echo.factor=2", "echo.factor", "it decides the run's samples"),
    ("train.batch_size=32", "train.batch_size", "it decides the run's samples"),
])
def test_what_decides_samples_steps_or_model_is_refused_naming_the_key(run, assignment, key, why):
    with pytest.raises(ConfigError) as err:
        open_run(str(run), [assignment])
    message = str(err.value)
    assert message.startswith(f"--resume {run}: {key} cannot change on resume") and why in message
    assert "a resume may change: preprocess.actors, scaling.cpus_per_worker, scaling.num_workers" in message


def test_the_cli_refuses_with_exit_2_before_anything_starts(run, tmp_path, monkeypatch, capsys):
    before = {p.name: p.read_text() for p in run.iterdir()}
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--resume", str(run), "--set", "train.max_epochs=4"]) == 2
    err = capsys.readouterr().err
    assert "train.max_epochs cannot change on resume" in err and "the run has 20, --set gives 4" in err
    assert {p.name: p.read_text() for p in run.iterdir()} == before and not (tmp_path / "mlflow.db").exists()
    # a bad value of a key that may change is named as any --set is
    assert main(["train", "--resume", str(run), "--set", "preprocess.actors.max_size=0"]) == 2
    assert "preprocess.actors.max_size" in capsys.readouterr().err
