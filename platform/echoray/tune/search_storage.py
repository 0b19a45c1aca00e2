"""Where a search keeps what must outlive the machine it started on.

Without `train.storage_path` a search lives in its local folder (search.json, Tune's
experiment under tune/, the trials' run folders under trials/), which serves one node.
With it, the search's home is `train.storage_path/<search folder name>` (an object store
URI, or a shared mount), and what `echoray tune --resume` needs is there:

    <home>/search.json           the resolved pipeline, parent run id, the home itself
    <home>/tune/                 Ray Tune's experiment (RunConfig storage_path, every trial's folder)
    <home>/trials/<trial run>/   each trial's run folder (uploaded when it ends) and checkpoints
    <home>/summary.json, trials.png   once the search finished

so `echoray tune --resume <home>` continues it from any machine with the credentials
(the local folder is then recreated under runs/). A local folder on a cluster with
several nodes (or an autoscaler) is refused with exit 2 naming train.storage_path, as
for training (echoray/storage.unshared_storage): Tune needs storage every node reaches.

The filesystem handed to Tune (RunConfig.storage_filesystem) is the one open_location
builds from the standard AWS variables, with bounded connect/request timeouts, and every
call under TrainConfig.store_retry_s (echoray/storage/retrying_fs.py), as the search's own files are
(publish) and each trial's run folder (upload_run).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from echoray.config_load import ConfigError
from echoray.storage.fs import (
    StorageError,
    checkpoint_location,
    is_uri,
    open_location,
    require_shared_storage,
    upload_folder,
)
from echoray.storage.retry import RetryPolicy
from echoray.storage.retrying_fs import retrying

STATE_FILE = "search.json"
KEY = "train.storage_path"


def search_home(storage_path: str | None, d: Path) -> str | None:
    """The search's folder in train.storage_path, or None (the local folder only)."""
    return checkpoint_location(storage_path, d) if storage_path else None


def _open(location: str) -> tuple[pafs.FileSystem, str]:
    try:
        return open_location(location, KEY)
    except StorageError as exc:  # before anything starts: bad input
        raise ConfigError(str(exc)) from None


def check_shared(home: str | None, d: Path, declared_shared: bool) -> None:
    """Refuse (ConfigError, exit 2) a search whose trials could not all reach its storage; Ray must be up."""
    try:
        require_shared_storage(home or str(d.resolve()), 1, declared_shared)
    except StorageError as exc:
        raise ConfigError(f"{exc} (a search's experiment and trials too)") from None


def tune_storage(home: str | None, d: Path, retry_s: float, new: bool = False) -> tuple[str, pafs.FileSystem | None]:
    """(storage_path, storage_filesystem) for Tune's RunConfig / Tuner.restore, its calls
    under `retry_s` (TrainConfig.store_retry_s). `new`: a new search, whose home must not hold
    another one (claim_home)."""
    if home is None:
        return str(d.resolve()), None
    fs, path = _open(home)
    if new:
        claim_home(home)
    return path, retrying(fs, retry_s, f"{KEY} {home}")


def publish(home: str | None, retry_s: float, *files: Path) -> None:
    """Copy the search's own files (search.json, summary.json, trials.png) to its home,
    each write waiting out an outage of up to `retry_s` (TrainConfig.store_retry_s)."""
    if home is None:
        return
    fs, path = _open(home)
    for f in files:
        def write(f=f):
            with fs.open_output_stream(f"{path}/{f.name}") as out:
                out.write(f.read_bytes())

        RetryPolicy(retry_s).call(write, f"{KEY} {home}/{f.name}")


def upload_run(runs_storage: str | None, run_dir: Path, retry_s: float) -> None:
    """A trial's run folder to `runs_storage/<its name>` (beside its checkpoints there),
    through an outage of up to `retry_s` (TrainConfig.store_retry_s). A copy that still fails is
    logged, not raised: the trial's result is in Tune and MLflow already, and an error
    here must not replace the one its training may have raised."""
    if runs_storage is None or not run_dir.exists():
        return
    where = f"{KEY} {runs_storage}/{run_dir.name}"
    try:
        fs, path = open_location(runs_storage, KEY)
        RetryPolicy(retry_s).call(lambda: upload_folder(fs, run_dir, f"{path}/{run_dir.name}"), where)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        logging.getLogger("echoray.storage").warning("%s: the trial's run folder was not copied: %s", where, exc)


def _read(location: str, name: str) -> bytes | None:
    fs, path = _open(location)
    if fs.get_file_info(f"{path}/{name}").type != pafs.FileType.File:
        return None
    with fs.open_input_stream(f"{path}/{name}") as f:
        return f.read()


def _state(location: str, resume: str) -> dict[str, Any]:
    if _read(location, "summary.json") is not None:
        raise ConfigError(f"--resume {resume}: this search already finished (summary.json); nothing to resume")
    raw = _read(location, STATE_FILE)
    if raw is None:
        raise ConfigError(f"--resume {resume}: no {STATE_FILE} there, so it is not a search folder")
    return json.loads(raw)


def claim_home(home: str | None) -> None:
    """A new search's home must not hold another search (ConfigError, exit 2)."""
    if home is not None and _read(home, STATE_FILE) is not None:
        raise ConfigError(f"{KEY}: {home} already holds a search (search.json); continue it with "
                          f"echoray tune --resume {home}, or choose another --out name")


def open_search(resume: str, runs_root: Path) -> tuple[Path, dict[str, Any]]:
    """(local folder, search.json) of the search `--resume` names: its local folder, or its
    home in train.storage_path (a URI: the local folder is then runs_root/<its name>).
    A search with a home is continued from the state there, whichever was named."""
    state = _state(resume, resume)
    home = state.get("storage")
    if home and home.rstrip("/") != resume.rstrip("/"):
        state = _state(home, resume)
    local = runs_root / resume.rstrip("/").rsplit("/", 1)[-1] if is_uri(resume) else Path(resume)
    local.mkdir(parents=True, exist_ok=True)
    return local, state
