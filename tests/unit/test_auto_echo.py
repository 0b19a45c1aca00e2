"""runtime/auto_echo.py, the `auto` law the collector hosts, driven by a clock and a
Throughput fed as the actors and workers feed it: no Ray, no sleeping. Times are
multiples of 0.25 s, exact in binary, so the windows' edges are exact."""

import math

import pytest

from echoray.runtime.auto_echo import AUTO_UPDATE_S, AutoEcho
from echoray.runtime.throughput import Throughput

pytestmark = pytest.mark.unit
DT = 0.25


class Sim:
    """One actor and one worker, both busy all the time, at rates that can change."""

    def __init__(self, echo: AutoEcho, tp: Throughput):
        self.echo, self.tp, self.t, self.trained = echo, tp, 0.0, 0.0

    def advance(self, until: float, up: float, down: float, first_step_at: float | None = DT,
                report_every: float = DT) -> None:
        """The actor reports every `report_every` seconds (one call), the worker every DT."""
        while self.t + DT <= until:
            self.t += DT
            if self.t % report_every == 0:
                self.tp.add_stage("upstream", "a0", up * report_every, report_every, at=self.t)  # rows, busy s
            self.trained += down * DT
            self.tp.set_worker(0, self.trained, self.t)  # cumulative
            self.echo.on_heartbeat(self.t, first_step_at)


def make(factor, **kw):
    tp = Throughput()
    echo = AutoEcho(factor, 8.0, tp, now=0.0, **kw)
    return echo, Sim(echo, tp)


def test_a_fixed_factor_never_moves():
    echo, sim = make(2.5)
    sim.advance(5.0, up=100.0, down=700.0)
    assert echo.factor == 2.5 and echo.history == []


def test_auto_follows_a_steady_R_one_update_per_window():
    echo, sim = make("auto")
    assert echo.factor == 1.0  # before any window
    sim.advance(3.0, up=100.0, down=400.0)
    # the first window opens at the first heartbeat after the first step (0.25 s) and each
    # closes AUTO_UPDATE_S later: updates at 0.75, 1.25, ..., 2.75
    assert [p["time"] for p in echo.history] == [0.75, 1.25, 1.75, 2.25, 2.75]
    assert all(p["measured_R"] == pytest.approx(4.0) for p in echo.history)
    assert echo.factor == pytest.approx(4.0)
    assert AUTO_UPDATE_S == 0.5


def test_auto_is_capped_and_falls_when_R_falls():
    echo, sim = make("auto")
    sim.advance(3.0, up=100.0, down=2000.0)  # R = 20, above the cap of 8
    assert echo.factor == 8.0
    sim.advance(12.0, up=100.0, down=200.0)  # R = 2 from 3 s on
    # the estimate of log R is an exponential average with gain 1/3 (never clipped, so the
    # windows at R = 20 are what it decays from): one window straddling the change, then
    # 17 at R = 2 bring it within 0.5% of 2, from above
    assert 2.0 < echo.factor < 2.01
    assert echo.history[-1]["measured_R"] == pytest.approx(2.0)


def test_a_resumed_factor_weighs_as_one_window():
    echo, sim = make("auto", resumed_factor=4.0)
    assert echo.factor == 4.0
    sim.advance(0.75, up=100.0, down=100.0)  # one window, at R = 1
    assert len(echo.history) == 1
    # the mean of log 4 and log 1: the second window's gain is 1/2
    assert echo.factor == pytest.approx(math.exp(math.log(4.0) / 2))


def test_before_the_first_step_nothing_is_measured():
    echo, sim = make("auto")
    sim.advance(3.0, up=100.0, down=0.0, first_step_at=None)  # actors read, no worker has stepped
    assert echo.factor == 1.0 and echo.history == []


def test_windows_between_actor_reports_use_the_last_calls():
    """A text actor reports once per call, seconds apart: e is set 0.5 s after the first
    step from the reads before it, and every window's upstream is the last four calls'."""
    echo, sim = make("auto")
    sim.advance(4.0, up=100.0, down=0.0, first_step_at=None, report_every=1.0)  # 4 calls of 1 s
    sim.advance(6.0, up=100.0, down=400.0, first_step_at=4.25, report_every=4.0)
    # windows close at 4.75, 5.25, 5.75, no actor report in any: upstream is the 4 calls'
    assert [p["time"] for p in echo.history] == [4.75, 5.25, 5.75]
    assert all(p["measured_R"] == pytest.approx(4.0) for p in echo.history)
    sim.advance(8.0, up=50.0, down=400.0, first_step_at=4.25, report_every=4.0)  # a 4 s call at 8.0
    # its 200 rows in 4 s with the three 1 s calls before it: 500 rows in 7 s
    assert echo.history[-1]["time"] == 7.75 and echo.history[-1]["measured_R"] == pytest.approx(4.0)
    sim.advance(8.5, up=50.0, down=400.0, first_step_at=4.25, report_every=4.0)
    assert echo.history[-1]["time"] == 8.25 and echo.history[-1]["measured_R"] == pytest.approx(400 / (500 / 7))
