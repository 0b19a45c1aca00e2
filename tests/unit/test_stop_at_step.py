"""SIGTERM at random moments of real training (the WorkerLoop in the fit thread of
driver/monitor.watch_fit, the CLI's signal handling, no Ray): every interrupted loop
stops at a step boundary and is joined, the process exits 143 exactly, never aborts.

Before driver/stop.py, a SIGTERM that landed in watch_fit's Thread.join made CPython
3.11 mark the running fit thread stopped (threading._wait_for_tstate_lock), so the CLI
went on to shut Ray down and finalise under it: exit 1 or SIGABRT."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from echoray.driver import monitor, stop

HARNESS = Path(__file__).with_name("stop_harness.py")
FULL_STEPS = 48  # stop_harness.py's run: 6 epochs of 8 steps
PLATFORM = Path(__file__).resolve().parents[2] / "platform"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigterm_at_random_moments_stops_at_a_step_and_exits_143(seed):
    rounds = 17  # 51 signals over the three seeds
    env = {**os.environ, "PYTHONPATH": f"{PLATFORM}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, str(HARNESS), str(rounds), str(seed)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 143, proc.stdout[-2000:] + proc.stderr[-4000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == rounds
    for r in results:
        assert r["exit_code"] == 143 and r["joined"] is True
        if "aborted_at_step" in r:  # interrupted mid-run: stopped before a step, none after
            assert not r["finished"] and r["aborted_at_step"] == r["steps"], r
        elif "returned" in r:  # the loop had trained it all (the signal came after, or at its end)
            assert r["steps"] == FULL_STEPS, r
        else:  # the signal came before the fit thread started
            assert not r["finished"] and r["steps"] == 0, r
    assert any(not r["finished"] for r in results)  # the signals did land inside training


def test_fit_end_is_not_fooled_by_an_interrupted_join():
    """The fit thread counts as running until its target returns, whatever Thread.join did."""
    import threading

    release = threading.Event()
    assert not monitor.fit_thread_running(0)
    with pytest.raises(KeyboardInterrupt):
        monitor.watch_fit(lambda: release.wait(30), _Raising(), None, 600, lambda ev: None, poll_s=0.01)
    assert stop.requested()  # the driver gave up: a loop would stop at its next step
    assert monitor.fit_thread_running(0.05)
    release.set()
    assert not monitor.fit_thread_running(10)


class _Raising:
    """A collector whose first poll is interrupted (as by Ctrl-C on the driver)."""

    class _Poll:
        def remote(self, *args):
            raise KeyboardInterrupt

    poll = _Poll()
