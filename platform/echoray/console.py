"""A quiet console for `echoray train`: echoray's own lines on the terminal, everything the
libraries print (Ray's start-up warnings, its core worker's C++ log lines, MLflow's database
set-up, Ray Data's notices) in the run's log file, `RUN_DIR/console.log`.

Contract:
- Nothing changes until the CLI asks for it (`want_quiet()`, unless `--verbose`) and a run
  starts (`divert()`): the Python API, tests calling `cli.main` with a captured
  `sys.stderr`, and Tune trials keep the console as it was.
- `divert` points file descriptor 2 at a log file (temporary until `settle(run_dir)`
  moves it into the run folder, once the run has one), so every write to the process's
  stderr (Python's `sys.stderr`, the logging handlers that write to it, Ray's C++ logger,
  Ray's and MLflow's child processes) lands there; stdout, where echoray's progress lines
  go, is untouched. echoray's own error messages go to `stderr()`, the terminal's stderr,
  so a failure still prints in full; `ECHORAY_DEBUG=1` tracebacks too.
- `restore()` puts fd 2 back (the end of `cli.main`).

Public knobs were preferred where they exist (Ray Data's progress settings in
runtime/session.py, Ray Train's `LoggingConfig`); Ray's core worker prints its error-level
lines to stderr with no per-process switch (`RAY_BACKEND_LOG_LEVEL` would also silence the
raylet's own log files), hence the descriptor.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TextIO

LOG_NAME = "console.log"

_wanted = False
_terminal: TextIO | None = None
_saved_fd: int | None = None
_log_path: Path | None = None


def want_quiet(quiet: bool = True) -> None:
    """The CLI's choice: divert library output at the next `divert` (False: `--verbose`)."""
    global _wanted
    _wanted = quiet


def divert() -> bool:
    """Send the process's stderr to a log file of its own (a temporary file until `settle`
    moves it into the run folder); False when quiet mode was not asked for, is already on,
    or `sys.stderr` is not the process's fd 2 (a caller captured it). Nothing is written
    into the run folder here: a run refused before it starts leaves none."""
    global _terminal, _saved_fd, _log_path
    if not _wanted or _saved_fd is not None or not _is_fd2(sys.stderr):
        return False
    sys.stderr.flush()
    log_fd, name = tempfile.mkstemp(prefix="echoray-console-", suffix=".log")
    _saved_fd = os.dup(2)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    _terminal = os.fdopen(os.dup(_saved_fd), "w", buffering=1, encoding="utf-8", errors="replace")
    _log_path = Path(name)
    return True


def settle(run_dir: Path) -> Path | None:
    """Move the log into `run_dir/console.log` (appended: a resumed run adds to it) and
    keep writing there; the path, or None when not diverted."""
    global _log_path
    if _saved_fd is None or _log_path is None:
        return None
    path = run_dir / LOG_NAME
    if _log_path == path:
        return path
    sys.stderr.flush()
    run_dir.mkdir(parents=True, exist_ok=True)
    log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    with open(_log_path, "rb") as early, os.fdopen(os.dup(log_fd), "wb") as out:
        shutil.copyfileobj(early, out)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    _log_path.unlink(missing_ok=True)
    _log_path = path
    return path


def advice() -> list[str]:
    """echoray's sentences for the library warnings a user can act on, which now go to the log."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "disabled":
        return ["Ray runs without token authentication (RAY_AUTH_MODE=disabled): anyone who can reach "
                "its ports can run code on this machine; unset RAY_AUTH_MODE to turn it on"]
    return []


def stderr() -> TextIO:
    """Where echoray's own error lines go: the terminal's stderr, diverted or not."""
    return _terminal if _terminal is not None else sys.stderr


def log_path() -> Path | None:
    """The log file library output goes to, while diverted."""
    return _log_path


def restore() -> None:
    """Point fd 2 back at the terminal (idempotent). A log that never reached a run folder
    (the run was refused or failed before it had one) is removed when empty, else named."""
    global _terminal, _saved_fd, _log_path
    if _saved_fd is None:
        return
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os.dup2(_saved_fd, 2)
    os.close(_saved_fd)
    if _log_path is not None and _log_path.name != LOG_NAME:
        if _log_path.stat().st_size:
            print(f"echoray: Ray's and MLflow's messages of this run: {_log_path}", file=_terminal)
        else:
            _log_path.unlink(missing_ok=True)
    if _terminal is not None:
        _terminal.flush()
        _terminal.close()
    _terminal = _saved_fd = _log_path = None


def _is_fd2(stream) -> bool:
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False
