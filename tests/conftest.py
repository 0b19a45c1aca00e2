"""Shared fixtures. Tiers by folder: unit (no Ray), integration (local Ray), e2e
(`ray start --head`, `ray job submit`, a real `mlflow server`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import REPO  # noqa: E402

sys.path.insert(0, str(REPO / "platform"))  # also works before `pip install -e .`


def pytest_collection_modifyitems(items):
    for item in items:
        tier = Path(str(item.fspath)).parent.name
        if tier in ("unit", "integration", "e2e"):
            item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture
def sqlite_uri(tmp_path) -> str:
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
