"""The CLI's error contract, before anything starts: exit 2 for bad input, 1 for an
unreachable tracking server; each message names the problem; nothing is written."""

import subprocess
import sys

import pytest

from helpers import REPO, free_port


def echoray(*args, cwd):
    platform_dir = str(REPO / "platform")
    env_code = f"import sys; sys.path.insert(0, {platform_dir!r}); from echoray.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", env_code, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args, code, named", [
    (["train", "--set", "train.bogus=1"], 2, "train.bogus: unknown key"),
    (["train", "--set", "echo.factor=0.5"], 2, "echo.factor"),
    (["train", "--set", "echo.stage=sideways"], 2, "echo.stage"),
    (["train", "missing.yaml"], 2, "pipeline file not found: missing.yaml"),
    (["train", "--set", "source.kind=cifar10", "--set", "source.path=/nonexistent/cifar"], 2,
     "/nonexistent/cifar"),
    (["train", "--set", "source.kind=image_folder", "--set", "source.path=/nonexistent/imgs"], 2,
     "/nonexistent/imgs"),
    (["bench-input", "--set", "train.bogus=1"], 2, "train.bogus: unknown key"),
    (["bench-input", "--set", "source.kind=image_folder", "--set", "source.path=/nonexistent/imgs"], 2,
     "/nonexistent/imgs"),
    (["bench-input", "--seconds", "-1"], 2, "expected a positive number of seconds"),
    (["bench-input", "--set", "source.chunk_size=0"], 2, "source.chunk_size"),
    (["train", "--set", "source.remote={latency_ms: 28}"], 2,
     "source.remote: this key was removed (emulate a slow store with the benchmarks reader, "
     "source.kind: slow_store:SlowStore"),
    (["frobnicate"], 2, "invalid choice"),
    ([], 2, "required"),
])
def test_bad_input_exits_2_naming_the_problem_and_writes_nothing(tmp_path, args, code, named):
    out = echoray(*args, cwd=tmp_path)
    assert out.returncode == code, out.stderr
    assert named in out.stderr
    assert list(tmp_path.iterdir()) == []  # no runs/, no mlflow.db


def test_unreachable_tracking_server_fails_before_training(tmp_path):
    uri = f"http://127.0.0.1:{free_port()}"
    out = echoray("train", "--set", f"tracking.uri={uri}", cwd=tmp_path)
    assert out.returncode == 1
    assert f"MLflow tracking server {uri} is unreachable" in out.stderr
    assert list(tmp_path.iterdir()) == []
