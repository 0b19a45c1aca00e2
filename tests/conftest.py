"""Shared fixtures. Tiers by folder: unit (no Ray), integration (local Ray), e2e
(`ray start --head`, `ray job submit`, a real `mlflow server`)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import REPO  # noqa: E402
from s3_server import S3Server  # noqa: E402

sys.path.insert(0, str(REPO / "platform"))  # also works before `pip install -e .`
# A pytest-xdist worker (the unit and integration tiers run on every core) keeps its Ray
# files apart: a `ray.init()` with no address connects to the cluster named in
# <temp dir>/ray/ray_current_cluster, which `ray.cluster_utils` (tests/integration/two_nodes.py)
# writes, so with one temp dir a run of one worker could join another worker's two-node Ray.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["RAY_TMPDIR"] = str(Path(tempfile.gettempdir()) / f"ray-{os.environ['PYTEST_XDIST_WORKER']}")
    Path(os.environ["RAY_TMPDIR"]).mkdir(exist_ok=True)
# benchmarks/ importable here and in every process the tests start (a local Ray's inherit
# the environment): the slow store is a reader by import path, slow_store:SlowStore. And
# examples/ in those processes, as its YAML files ask of every node (my_ops, my_model,
# my_reader by import path): test_examples.py's runs attach to the tests' local Ray.
sys.path.append(str(REPO / "benchmarks"))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO / "benchmarks"),
                                                         str(REPO / "examples")]))


def pytest_collection_modifyitems(items):
    for item in items:
        tier = Path(str(item.fspath)).parent.name
        if tier in ("unit", "integration", "e2e"):
            item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture(scope="session")
def _empty_mlflow_store(tmp_path_factory) -> Path:
    """An MLflow sqlite store as its first open leaves it (tables made, schema migrated,
    the Default experiment), made once per session. That first open runs MLflow's ~70
    schema migrations, seconds on this machine, and every run of the integration tier
    opened a store of its own."""
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("mlflow_store") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def sqlite_uri(tmp_path, _empty_mlflow_store) -> str:
    """A fresh, empty MLflow store of this test's own (tmp_path/mlflow.db): a copy of the
    session's migrated empty store, so no process of the test pays the migrations."""
    shutil.copyfile(_empty_mlflow_store, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(autouse=True)
def _no_ambient_tracking(monkeypatch):
    # Tests choose their own MLflow store and Ray; never the developer's.
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")


@pytest.fixture(scope="session")
def s3():
    """A real S3 server (moto_server, its own process) for the whole session. Its AWS
    variables are set in this process's environment, as a user would export them, so a
    local Ray started afterwards (tests/integration's `local_ray`) passes them to its
    workers; the e2e head is started without them (jobs get them in their runtime env)."""
    tmp = Path(tempfile.mkdtemp(prefix="s3srv"))
    server = S3Server(tmp / "moto.log")
    saved = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    try:
        yield server
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


@pytest.fixture(scope="session")
def s3_data(s3, tmp_path_factory):
    """One small dataset of each kind, on local disk and the same files in a bucket:
    {kind: (local path, s3 URI)}. The Parquet, CIFAR and IDX URIs are prefixes (folders)."""
    from echoray.data.fixtures import (
        write_cifar10_bin,
        write_idx,
        write_image_folder,
        write_parquet,
    )

    local = tmp_path_factory.mktemp("s3data")
    bucket = s3.make_bucket("echoray-data")
    paths = {
        "cifar10": write_cifar10_bin(local / "cifar10", per_batch=32, batches=5, test=32),
        "image_folder": write_image_folder(local / "image_folder", n=200, classes=4, size=32),
        "parquet": write_parquet(local / "parquet" / "d.parquet", n=200, classes=4, row_group=16).parent,
        "idx": write_idx(local / "idx", train=160, test=32),
    }
    return {kind: (path, s3.upload(path, f"{bucket}/{kind}")) for kind, path in paths.items()}
