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


def _raise(signum, frame) -> None:
    raise Terminated()


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


def reclaim_sigterm() -> None:
    """After ray.init: SIGTERM is ours again while a command runs."""
    if _active and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise)
