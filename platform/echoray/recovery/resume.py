"""`echoray train --resume RUN_DIR`: continue a run whose driver died or was interrupted.

A run folder holds `config.yaml` (the resolved pipeline) and `run.json` (written once the
MLflow run exists: its id and tracking URI, where Ray Train keeps the checkpoints, when
the run started). Resuming reopens the same MLflow run (status RUNNING again), starts
from the latest checkpoint Ray Train registered (the one its restarted controller will
hand to the workers), logs any finished epochs that the dead driver had not logged yet,
and then continues as a normal run. A folder with `summary.json` is finished and is not
resumed.

`--set KEY=VALUE` with `--resume` may change how the rest of the run is placed and
watched (CHANGEABLE_ON_RESUME: the preprocessing pool, the workers' CPUs and resources,
timeouts) and how many Ray Train workers train it (scaling.num_workers, an elastic
resume: recovery/reshard.py), for this resume only: config.yaml keeps the values the run
started with and run.json's `resumes` entry lists the changes. Every other key decides
the run's samples, steps or model and is refused naming it (ConfigError: exit 2); so is
a worker count that batch augmentation's groups do not divide, and any other count for
a run trained in Ray Train's local mode (one worker, its checkpoints outside Ray Train).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from echoray.config import PipelineConfig
from echoray.config_load import ConfigError, flatten, load_config
from echoray.records import CheckpointMeta
from echoray.storage.fs import StorageError, is_uri, open_location

RUN_STATE = "run.json"

# Dotted keys (a trailing "." covers a section) that `--resume RUN --set` may change: where
# the rest of the run's work is placed, by how many workers, and how long the driver waits,
# none of its samples, model or numbers. The read plan and the replay of consumed rows depend
# on neither the preprocessing pool nor the number of workers (data/plan.py,
# accounting/consumed.py); a checkpoint's per-worker counters are resharded (recovery/reshard.py).
CHANGEABLE_ON_RESUME = ("preprocess.actors.", "scaling.cpus_per_worker", "scaling.num_workers",
                        "scaling.resources_per_worker", "train.log_every_s", "train.stall_timeout_s")


@dataclass
class Resume:
    run_dir: Path
    mlflow_run_id: str
    tracking_uri: str
    pipeline: str
    started_at: float
    resumes: list[dict[str, Any]]
    storage: str  # where Ray Train keeps the checkpoints: a folder or an object store URI
    changed: dict[str, list[str]] = field(default_factory=dict)  # --set on this resume: key -> [was, now]
    # "ray_train", or "local_mode": the run trained in Ray Train's local mode and keeps its
    # checkpoints in a CheckpointStore (train/local_fit.py); a run resumes the way it started.
    trainer: str = "ray_train"
    checkpoint: Any = None  # ray.train.Checkpoint, or None: no checkpoint yet, start over
    meta: CheckpointMeta | None = None  # the checkpoint's meta.json
    audit: list[dict[str, Any]] = field(default_factory=list)  # audit rows up to the checkpoint

    @property
    def epoch(self) -> int:
        return self.meta.evals if self.meta is not None else 0

    @property
    def history(self) -> list[dict[str, Any]]:
        """The checkpoint's epoch records as the driver logs them (dicts)."""
        return [r.to_dict() for r in self.meta.history] if self.meta is not None else []

    def collector_seed(self) -> dict[str, Any] | None:
        if self.checkpoint is None or self.meta is None:
            return None
        return {"checkpoint": self.checkpoint, "epoch": self.meta.evals, "start_epoch": self.meta.first_open_pass,
                "steps": self.meta.steps, "echo_factor": self.meta.echo_factor}


def write_run_state(run_dir: Path, *, mlflow_run_id: str, tracking_uri: str, pipeline: str,
                    started_at: float, storage: str, resumes: list | None = None,
                    trainer: str = "ray_train") -> None:
    state = {"mlflow_run_id": mlflow_run_id, "mlflow_tracking_uri": tracking_uri, "pipeline": pipeline,
             "started_at": started_at, "ray_train_storage": storage, "resumes": resumes or [],
             "trainer": trainer}
    tmp = run_dir / (RUN_STATE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(run_dir / RUN_STATE)


def changes_on_resume(started: PipelineConfig, now: PipelineConfig, key: str) -> dict[str, list[str]]:
    """The keys `now` changes from `started` ({key: [was, now]}); ConfigError naming the first
    one a resume cannot change (CHANGEABLE_ON_RESUME)."""
    was, new = flatten(started), flatten(now)
    changed = {k: [was.get(k, "(unset)"), new.get(k, "(unset)")] for k in sorted(set(was) | set(new))
               if was.get(k) != new.get(k)}
    for k, (old, value) in changed.items():
        if k.startswith(CHANGEABLE_ON_RESUME) or k in CHANGEABLE_ON_RESUME:
            continue
        why = " (it decides the run's samples, steps or model)"
        raise ConfigError(f"{key}: {k} cannot change on resume{why}: the run has {old}, --set gives {value}. "
                          f"Resume without it, or start a new run; a resume may change: "
                          f"{', '.join(c.rstrip('.') for c in CHANGEABLE_ON_RESUME)}")
    return changed


def open_run(run_dir: str, overrides: list[str] | None = None) -> tuple[PipelineConfig, Resume]:
    """Validate the folder and load its config, with `overrides` (--set) where a resume may
    change them, before anything starts (ConfigError: exit 2)."""
    d = Path(run_dir)
    key = f"--resume {d}"
    if not d.is_dir():
        raise ConfigError(f"{key}: no such run folder")
    if (d / "summary.json").exists():
        raise ConfigError(f"{key}: the run already finished (summary.json is there); nothing to resume")
    if not (d / "config.yaml").is_file() or not (d / RUN_STATE).is_file():
        raise ConfigError(f"{key}: not a resumable run folder (needs config.yaml and {RUN_STATE}, written "
                          "when training starts)")
    try:
        state = json.loads((d / RUN_STATE).read_text())
        run_id, uri = state["mlflow_run_id"], state["mlflow_tracking_uri"]
        storage = state["ray_train_storage"]
        trainer = state.get("trainer", "ray_train")
    except (ValueError, KeyError) as exc:
        raise ConfigError(f"{key}: {d / RUN_STATE} is unreadable ({exc})") from None
    if trainer not in ("ray_train", "local_mode"):
        raise ConfigError(f"{key}: the run trained with echoray's former in-process trainer ({trainer!r}), "
                          "whose checkpoints this version does not read; start the run again")
    if is_uri(storage):  # the checkpoints are in an object store: reachable, with these credentials?
        try:
            open_location(storage, "train.storage_path")
        except StorageError as exc:
            raise ConfigError(f"{key}: {exc}") from None
    cfg = load_config(d / "config.yaml")
    changed = {}
    if overrides:
        try:  # a value the run's other keys do not allow (e.g. a worker count groups do not divide)
            new = load_config(d / "config.yaml", overrides)
        except ConfigError as exc:
            raise ConfigError(f"{key}: {exc}") from None
        changed = changes_on_resume(cfg, new, key)
        cfg = new
    if trainer == "local_mode" and "scaling.num_workers" in changed:
        raise ConfigError(f"{key}: scaling.num_workers cannot change on resume for this run: it trained in "
                          "Ray Train's local mode (one worker in the driver's process, its checkpoints outside "
                          "Ray Train), and resumes that way; start a new run to train with more workers")
    if not cfg.train.checkpoint_every:  # its epochs were logged as they came: a restart would repeat them
        raise ConfigError(f"{key}: the run kept no checkpoints (train.checkpoint_every: 0); it cannot be resumed")
    cfg.tracking.uri = uri  # the same store, whatever the current folder or environment
    return cfg, Resume(run_dir=d, mlflow_run_id=run_id, tracking_uri=uri, pipeline=state["pipeline"],
                       started_at=float(state["started_at"]), resumes=list(state.get("resumes", [])),
                       storage=storage, trainer=trainer, changed=changed)


def find_checkpoint(resume: Resume, train_run_name: str) -> None:
    """The latest checkpoint in Ray Train's snapshot (in the run's storage, local or an object
    store): exactly what its controller restores. A run in local mode: the latest in
    its CheckpointStore. None found: the run was interrupted before its first checkpoint
    and starts over, under the same MLflow run."""
    from echoray.recovery.checkpoint import read_audit, read_meta

    kept = _local_mode_checkpoints(resume) if resume.trainer == "local_mode" else \
        _ray_train_checkpoints(resume, train_run_name)
    if kept:
        resume.checkpoint = kept[-1]
        resume.meta = read_meta(kept[-1])
        for ckpt in kept:  # every kept one; with the audit on, all of them
            resume.audit += read_audit(ckpt)
    resume.resumes.append({"at": time.time(), "from_epoch": resume.epoch,
                           **({"changed": resume.changed} if resume.changed else {})})


def _ray_train_checkpoints(resume: Resume, train_run_name: str) -> list:
    """Ray Train's kept checkpoints, oldest first, the latest last."""
    import pyarrow.fs as pafs
    from ray.train import Result

    fs, path = open_location(resume.storage, "train.storage_path")
    # Ray Train's snapshot file name, the check Result.from_path makes itself: it reports "no
    # checkpoint registered yet" only as a bare RuntimeError's message, a type other failures share.
    snapshot = fs.get_file_info(f"{path}/{train_run_name}/checkpoint_manager_snapshot.json")
    if snapshot.type != pafs.FileType.File:
        return []
    result = Result.from_path(f"{resume.storage}/{train_run_name}")
    if result.checkpoint is None:
        return []
    older = [c for c, _ in result.best_checkpoints if c.path != result.checkpoint.path]
    return [*older, result.checkpoint]


def _local_mode_checkpoints(resume: Resume) -> list:
    from echoray.recovery.checkpoint_store import CheckpointStore

    store = CheckpointStore(resume.storage, None)
    return [store.checkpoint(k["name"]) for k in store.kept()]


def backfill(resume: Resume, logged_steps: set[int], log_epoch) -> int:
    """Log the checkpointed evaluations the dead driver did not get to log (MLflow has no
    metric at their optimizer step); returns how many."""
    missing = [ev for ev in resume.history if ev["step"] not in logged_steps]
    for ev in missing:
        log_epoch(ev)
    return len(missing)
