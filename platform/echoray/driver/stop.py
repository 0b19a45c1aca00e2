"""Stopping a fit at a step boundary, and leaving the process without killing threads.

Contract: once `request()` has been called (SIGTERM, Ctrl-C, or the driver giving up on
a fit: driver/monitor.watch_fit), a training loop in this process ends at its next step
boundary (train/loop.py WorkerLoop.train checks `requested()` before every optimizer
step and raises RunAborted), and driver/monitor.join_fit waits for the fit thread to end before the
driver kills the run's collector or shuts Ray down. `exit_now` then ends the process
without interpreter finalisation when a thread is still alive.

Why: the CLI shut Ray down and let the interpreter finalise while a training thread was
mid-step. (1) A SIGTERM landing in watch_fit's Thread.join made CPython 3.11 mark the
running fit thread stopped (see driver/monitor._fit_ends), so nothing waited for it:
exit 1 ("The core worker has already been shutdown", 3 of 8 SIGTERMed in-process runs
here) or SIGABRT. (2) Finalisation with daemon threads still running ends a thread that
comes back from native code with the GIL released (torch's backward pass, numpy's
unique, Ray Data's `iter_threaded` threads) with pthread_exit, whose forced unwind
through a C++ noexcept frame calls std::terminate: SIGABRT, exit -6 (2 of 6 here, the
stack ending in `take_gil` -> `pthread_exit`; 1 in 6 in CI).
"""

from __future__ import annotations

import os
import sys
import threading

_requested = threading.Event()


def request() -> None:
    """Ask every training loop of this process to stop at its next step boundary."""
    _requested.set()


def requested() -> bool:
    return _requested.is_set()


def clear() -> None:
    """A new fit starts (a reused Tune trial actor runs one fit after another)."""
    _requested.clear()


def other_threads_alive() -> list[str]:
    """Names of the threads besides the main one that are still running."""
    main = threading.main_thread()
    return [t.name for t in threading.enumerate() if t is not main and t.is_alive()]


def exit_now(code: int) -> None:
    """Exit with `code`. With threads still running (Ray Data's stream threads of an
    interrupted run, a fit thread stuck in Ray) the process ends with os._exit after
    stdout and stderr are flushed, so no thread is killed inside native code; the run's
    state (MLflow run, run folder, checkpoints) must be closed before this is called."""
    if other_threads_alive():
        streams = [sys.stdout, sys.stderr]
        if "echoray.console" in sys.modules:  # the terminal's stderr while Ray's output is diverted
            streams.append(sys.modules["echoray.console"].stderr())
        for stream in streams:
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe: nothing more to say
                pass
        os._exit(code)
    sys.exit(code)

