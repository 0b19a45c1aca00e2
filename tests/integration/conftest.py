import time

import pyarrow.parquet as pq
import pytest
import ray

from echoray.config_load import load_config


@pytest.fixture(scope="session")
def local_ray(s3):
    """One local Ray for the in-process integration runs (2 logical CPUs, like CI). Started
    after the S3 server's AWS variables are in the environment: its workers inherit them,
    as a user's local Ray inherits what the user exported."""
    from echoray.runtime.session import start_ray

    if ray.is_initialized():
        ray.shutdown()
    start_ray()
    yield
    ray.shutdown()


@pytest.fixture
def run_pipeline(local_ray, tmp_path, sqlite_uri):
    """Run `echoray train` in-process on the shared Ray; returns (summary, audit table or None)."""
    from echoray.run import train

    def _run(path=None, *overrides: str, name: str = "run"):
        cfg = load_config(path, [f"tracking.uri={sqlite_uri}", *overrides])
        out = tmp_path / name
        summary = train(cfg, str(path or "embedded:digits"), str(out), time.time())
        audit = pq.read_table(out / "audit.parquet") if (out / "audit.parquet").exists() else None
        return summary, audit

    return _run
