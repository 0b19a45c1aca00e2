"""MLflow: one run per `echoray train`, logged from the driver with rank 0's metrics.

A run the logger starts or reopens gets MLflow's own system metrics (system/cpu_utilization_percentage,
system/system_memory_usage_megabytes, disk, network; GPU where present) from the driver's
node, every MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL seconds (MLflow's default: 10), until
it ends; MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING=false turns them off."""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from pathlib import Path

from echoray.config import PipelineConfig
from echoray.storage.locations import default_sqlite_uri


class TrackingError(RuntimeError):
    pass


def tracking_uri(cfg: PipelineConfig) -> str:
    """config tracking.uri, else MLFLOW_TRACKING_URI, else sqlite:///mlflow.db in the cwd
    (in a Ray job: in ~/echoray, see storage/locations.py)."""
    uri = cfg.tracking.uri or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    return default_sqlite_uri()


def check_reachable(uri: str, timeout_s: float = 5.0) -> None:
    """Fail before training starts when an HTTP tracking server does not answer or a
    sqlite store's folder does not exist."""
    if uri.startswith("sqlite:///"):
        folder = Path(uri.removeprefix("sqlite:///")).parent
        if not folder.is_dir():
            raise TrackingError(f"MLflow tracking store {uri}: folder {folder} does not exist")
        return
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s) as resp:
            if resp.status != 200:
                raise TrackingError(f"MLflow tracking server {uri} answered HTTP {resp.status}")
    except (urllib.error.URLError, OSError) as exc:
        raise TrackingError(f"MLflow tracking server {uri} is unreachable: {exc}") from None


# MLflow 3 opens an experiment without a kind in its GenAI view ("Evaluations", traces);
# this tag (the value the UI's own experiment-type switch writes) selects its "Model
# training" view: runs, params, metric charts. Set only on experiments echoray creates.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


class RunLogger:
    """Thin wrapper over MlflowClient: explicit run ids, safe from any thread."""

    def __init__(self, uri: str, experiment: str):
        from mlflow.tracking import MlflowClient

        self.uri = uri
        try:
            self.client = MlflowClient(tracking_uri=uri)
            exp = self.client.get_experiment_by_name(experiment)
            self.experiment_id = exp.experiment_id if exp else self._create(experiment)
        except Exception as exc:  # noqa: BLE001 - any store failure: name the store
            raise TrackingError(f"MLflow tracking store {uri} cannot be used: {exc}") from None
        self.run_id: str | None = None
        self._monitor = None

    def _create(self, experiment: str) -> str:
        from mlflow.exceptions import MlflowException

        try:
            return self.client.create_experiment(experiment, tags=EXPERIMENT_KIND)
        except MlflowException:  # created meanwhile by a concurrent run (Tune trials): use it
            exp = self.client.get_experiment_by_name(experiment)
            if exp is None:
                raise
            return exp.experiment_id

    def reopen(self, run_id: str) -> str:
        """Continue logging to an existing run (a resumed one): RUNNING again."""
        try:
            self.client.get_run(run_id)
        except Exception as exc:  # noqa: BLE001
            raise TrackingError(f"MLflow run {run_id} is not in the tracking store {self.uri}: {exc}") from None
        self.client.update_run(run_id, status="RUNNING")
        self.run_id = run_id
        self._watch_system(resume=True)
        return run_id

    def logged_steps(self, key: str) -> set[int]:
        return {m.step for m in self.client.get_metric_history(self.run_id, key)}

    def start(self, run_name: str, params: dict[str, str], tags: dict[str, str],
              parent_run_id: str | None = None) -> str:
        from mlflow.entities import Param

        if parent_run_id:
            tags = {**tags, "mlflow.parentRunId": parent_run_id}
        run = self.client.create_run(self.experiment_id, run_name=run_name, tags=tags)
        self.run_id = run.info.run_id
        items = [Param(k, v[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i : i + 100])
        self._watch_system(resume=False)
        return self.run_id

    def _watch_system(self, resume: bool) -> None:
        """MLflow's system-metrics monitor on this run (a resumed one continues its steps)."""
        if os.environ.get("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "").lower() in ("false", "0"):
            return
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        self._monitor = SystemMetricsMonitor(self.run_id, resume_logging=resume, tracking_uri=self.uri)
        self._monitor.start()

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        batch = [Metric(k, float(v), ts, step) for k, v in metrics.items() if v is not None]
        self.client.log_batch(self.run_id, metrics=batch)

    def artifact_uri(self) -> str:
        return self.client.get_run(self.run_id).info.artifact_uri

    def log_file(self, path: Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path)

    def end(self, status: str) -> None:
        if self._monitor is not None:  # its last samples logged while the run is still RUNNING
            self._monitor.finish()
            self._monitor = None
        if self.run_id:
            self.client.set_terminated(self.run_id, status=status)
