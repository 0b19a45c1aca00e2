"""SIGTERM while a command runs is an interrupt like Ctrl-C (so the run is marked KILLED
and stays resumable), and the previous handler comes back afterwards."""

import os
import signal

import pytest

from echoray.driver.signals import Terminated, reclaim_sigterm, sigterm_interrupts


def test_sigterm_becomes_an_interrupt_only_while_a_command_runs():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt) as caught, sigterm_interrupts():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # what ray.init does to the driver
        reclaim_sigterm()
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next line
        raise AssertionError("SIGTERM was not turned into an interrupt")
    assert isinstance(caught.value, Terminated) and caught.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) == before
    reclaim_sigterm()  # outside a command: leaves the handler alone
    assert signal.getsignal(signal.SIGTERM) == before
