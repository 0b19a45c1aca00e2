"""Where a run's folder and the default MLflow store go when no --out / tracking.uri says.

A `ray job submit` driver runs inside Ray's temporary copy of the job's working
directory (under the session folder, `.../runtime_resources/working_dir_files/...`),
which Ray deletes with the session: a run folder or sqlite store there is lost. Ray's
job supervisor sets RAY_JOB_CONFIG_JSON_ENV_VAR in every job driver's environment
(ray/dashboard/modules/job/job_supervisor.py, Ray 2.60), which is how a job is told apart
from a local run or a driver attached with RAY_ADDRESS by hand.
"""

from __future__ import annotations

import os
from pathlib import Path

JOB_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def in_ray_job() -> bool:
    return JOB_ENV in os.environ


def echoray_home() -> Path:
    """$ECHORAY_HOME if set; else the current directory, except in a Ray job: ~/echoray
    on the node that runs the job's driver (a cluster's head)."""
    if os.environ.get("ECHORAY_HOME"):
        return Path(os.environ["ECHORAY_HOME"]).expanduser()
    return Path.home() / "echoray" if in_ray_job() else Path()


def runs_root() -> Path:
    return echoray_home() / "runs"


def default_sqlite_uri() -> str:
    home = echoray_home()
    if home != Path():  # ~/echoray on a fresh node: create it, as `runs/` is created locally
        home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(home / 'mlflow.db').resolve()}"
