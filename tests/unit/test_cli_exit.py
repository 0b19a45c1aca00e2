"""How the console script leaves when a fit thread is still blocked inside Ray (a stalled
run's controller never answered the abort): with main's exit status, its output flushed,
and without atexit handlers (Ray's atexit shutdown under that thread crashed the process
with SIGSEGV after the right stall message, twice in CI). With no such thread it exits
normally, atexit included."""

import subprocess
import sys
import threading
import time

import pytest

from echoray.driver.monitor import abandon_fits, fit_thread_running, watch_fit
from helpers import REPO

SCRIPT = """
import atexit, sys, threading
sys.path.insert(0, {platform!r})
import echoray.cli as cli
from echoray.driver.monitor import FIT_THREAD

def fake_main(argv=None):
    if {stuck}:
        threading.Thread(target=threading.Event().wait, name=FIT_THREAD, daemon=True).start()
    print("echoray: no training progress", end="")  # unflushed when the process leaves
    return 1

atexit.register(lambda: print(" ATEXIT", end=""))
cli.main = fake_main
cli.entry()
"""


def run_entry(stuck: bool) -> subprocess.CompletedProcess:
    code = SCRIPT.format(platform=str(REPO / "platform"), stuck=stuck)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_entry_with_a_stuck_fit_thread_exits_with_mains_status_flushed_and_skips_atexit():
    out = run_entry(stuck=True)
    assert (out.returncode, out.stdout) == (1, "echoray: no training progress"), out.stderr


def test_entry_without_a_fit_thread_exits_normally_running_atexit():
    out = run_entry(stuck=False)
    assert (out.returncode, out.stdout) == (1, "echoray: no training progress ATEXIT"), out.stderr


class Interrupted:
    """A collector whose first poll is interrupted (Ctrl-C on the driver)."""

    class poll:  # noqa: N801
        @staticmethod
        def remote(*args):
            raise KeyboardInterrupt


def start_blocked_fit(release: threading.Event) -> None:
    """A fit thread that runs until `release` is set, the driver's watch already given up."""
    with pytest.raises(KeyboardInterrupt):
        watch_fit(lambda: release.wait(60), Interrupted, None, 600, lambda ev: None, poll_s=0.01)


def test_fit_thread_running_waits_for_a_thread_that_ends_and_reports_one_that_does_not():
    """A fit thread is one that watch_fit started; it counts until its target returns."""
    release = threading.Event()
    start_blocked_fit(release)
    assert fit_thread_running(wait_s=0.2)  # still blocked after the wait
    threading.Timer(0.2, release.set).start()
    assert not fit_thread_running(wait_s=10)  # ended within the wait


def test_an_abandoned_fit_still_counts_as_running_but_is_not_waited_for():
    """run._end_collector abandons a stalled Ray Train fit that has no controller to abort:
    it keeps Ray up (counted as running) but the CLI's wait for it returns at once; a fit
    started after it is waited for as before, and once both end none is left."""
    stuck, later = threading.Event(), threading.Event()
    try:
        start_blocked_fit(stuck)
        abandon_fits()
        t = time.monotonic()
        assert fit_thread_running(wait_s=30)
        assert time.monotonic() - t < 10  # the 30 s were not waited (a wait would take all 30)
        start_blocked_fit(later)  # not abandoned: waited for until it ends
        t = time.monotonic()
        threading.Timer(0.2, later.set).start()
        assert fit_thread_running(wait_s=30)  # the abandoned one still runs
        assert 0.2 <= time.monotonic() - t < 10  # the later one was waited for, until its end
    finally:
        stuck.set()
        later.set()
    deadline = time.monotonic() + 10  # the abandoned one is not waited for: poll until it ends
    while fit_thread_running(wait_s=0) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not fit_thread_running(wait_s=0)  # both ended: nothing counts as running
