"""The Python API validates as the CLI does and raises what the CLI turns into exit 2,
before anything starts (no Ray, no run folder, no MLflow run)."""

import subprocess
import sys

import pytest

import echoray.api
from echoray.cli import main
from echoray.config_load import ConfigError
from echoray.config_load import load_config as cli_config
from echoray.data.sources import SourceError
from helpers import REPO


def cli_error(capsys, *argv) -> str:
    assert main(list(argv)) == 2
    return capsys.readouterr().err.strip().removeprefix("echoray: ")


def test_overrides_as_python_values_equal_the_cli_text():
    given = {"echo.stage": "after_augment", "echo.factor": 2.5, "train.target": None,
             "preprocess.actors.resources": {"cpu_node": 1}, "audit.enabled": True}
    text = ["echo.stage=after_augment", "echo.factor=2.5", "train.target=null",
            "preprocess.actors.resources={cpu_node: 1}", "audit.enabled=true"]
    path = REPO / "pipelines" / "digits.yaml"
    assert echoray.load_config(path, given) == cli_config(path, text) == echoray.load_config(path, text)
    assert echoray.load_config() == cli_config(None, [])  # the embedded default


@pytest.mark.parametrize("overrides, argv", [
    ({"echo.factr": 2}, ["--set", "echo.factr=2"]),
    ({"echo.stage": "sideways"}, ["--set", "echo.stage=sideways"]),
    ({"train.batch_size": -1}, ["--set", "train.batch_size=-1"]),
])
def test_bad_keys_and_values_raise_the_cli_message(capsys, tmp_path, overrides, argv):
    out = tmp_path / "never"
    with pytest.raises(ConfigError) as err:
        echoray.api.train(None, overrides, out)
    assert str(err.value) == cli_error(capsys, "train", *argv, "--out", str(out))
    assert not out.exists()


def test_missing_dataset_raises_source_error_naming_the_path(capsys, tmp_path):
    absent = tmp_path / "absent.parquet"
    with pytest.raises(SourceError) as err:
        echoray.api.train(overrides={"source.kind": "parquet", "source.path": str(absent)}, out=tmp_path / "r")
    assert f"source.path {absent}: no such file or directory" in str(err.value)
    assert str(err.value) == cli_error(capsys, "train", "--set", "source.kind=parquet", "--set",
                                       f"source.path={absent}", "--out", str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()
    assert echoray.SourceError is SourceError and echoray.ConfigError is ConfigError


@pytest.mark.parametrize("call, message", [
    (lambda: echoray.api.train(resume="/nonexistent/run"), "--resume /nonexistent/run: no such run folder"),
    (lambda: echoray.api.train("x.yaml", resume="/r"), "drop pipeline"),
    (lambda: echoray.api.train(overrides="echo.factor=2"), "overrides: a mapping or a list"),
    (lambda: echoray.api.tune(None), "echoray tune: give a pipeline or resume (exactly one)"),
    (lambda: echoray.api.tune("a.yaml", resume="/r"), "exactly one"),
    (lambda: echoray.api.tune(resume="/r", trials=3), "resume continues a run as it was started: drop trials"),
    (lambda: echoray.api.tune("pipelines/digits_search.yaml", trials=0), "trials: expected a positive integer, got 0"),
    (lambda: echoray.api.study("pipelines/digits_search.yaml", repeats=1.5), "repeats: expected a positive integer"),
    (lambda: echoray.api.study("pipelines/digits_search.yaml"), "echoray study needs a PIPELINE and --out DIR"),
    (lambda: echoray.api.study("pipelines/digits_search.yaml", "/tmp/x", variants="baseline,sideways:2"), "sideways"),
    (lambda: echoray.api.tune("pipelines/nope.yaml"), "pipeline file not found: pipelines/nope.yaml"),
])
def test_usage_errors_raise_config_error(monkeypatch, call, message):
    monkeypatch.chdir(REPO)
    with pytest.raises(ConfigError) as err:
        call()
    assert message in str(err.value)


def test_import_is_cheap_and_the_api_is_plain_functions():
    code = ("import sys, echoray, echoray.api; heavy = [m for m in ('ray', 'torch', 'mlflow') if m in sys.modules]; "
            "import echoray.train.models, echoray.tune.space; "
            "print(heavy, callable(echoray.api.train), callable(echoray.api.tune), callable(echoray.api.study), "
            "echoray.train.models.__name__)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(REPO / "platform"), "PATH": ""})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[] True True True echoray.train.models"
