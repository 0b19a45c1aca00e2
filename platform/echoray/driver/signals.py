"""SIGTERM ends a run the way Ctrl-C does: the MLflow run is marked KILLED and the run
folder stays resumable (`echoray train --resume`), instead of Python's silent exit.

`ray.init` installs its own SIGTERM handler in the driver (kill Ray's processes, exit 1,
the MLflow run left RUNNING); start_ray takes SIGTERM back while a CLI command runs.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so every cleanup path for an interrupt runs."""

    exit_code = 143  # 128 + SIGTERM, the shell's convention


_active = False
_terminated = False


def _raise(signum, frame) -> None:
    from echoray.driver import stop

    global _terminated
    stop.request()  # a training thread ends at its next step (driver/stop.py)
    _terminated = True
    raise Terminated()


def terminated() -> bool:
    """Whether a SIGTERM arrived during this command: the exit status is 143 even when a
    library turned the interrupt into its own exception (Tune's fit: SearchInterrupted)."""
    return _terminated


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    global _active
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _raise)
    _active = True
    try:
        yield
    finally:
        _active = False
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def deferred_sigterm() -> Iterator[None]:
    """Around ray.init while a command runs: a SIGTERM is held until Ray is up, then raised
    as Terminated (so the CLI's cleanup shuts the half-started Ray down, and the run is
    not left RUNNING). ray.init would otherwise install its own handlers for the time it
    connects: `sys.exit(15)`, and, for a local head, one that kills Ray's processes and
    exits 1 (ray/_private/node.py), which ended 2 of 10 SIGTERMed default runs with exit 1.
    Outside a command (a library caller) Ray's handlers stay. Ray internal: ray.init
    installs them through ray._private.utils.set_sigterm_handler on the main thread with no
    option to skip it, and calling ray.init from another thread fails for a local head."""
    import ray._private.utils as ray_utils

    setter = getattr(ray_utils, "set_sigterm_handler", None)
    if not _active or setter is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum, frame) -> None:
        from echoray.driver import stop

        global _terminated
        stop.request()
        _terminated = True
        held.append(signum)

    ray_utils.set_sigterm_handler = lambda handler: None
    signal.signal(signal.SIGTERM, hold)
    try:
        yield
    finally:
        ray_utils.set_sigterm_handler = setter
        signal.signal(signal.SIGTERM, _raise)
    if held:
        raise Terminated()


def reclaim_sigterm() -> None:
    """After ray.init: SIGTERM is ours again while a command runs."""
    if _active and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise)
