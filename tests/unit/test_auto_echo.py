"""runtime/auto_echo.py, the `auto` law the collector hosts, driven by a clock and a
Throughput fed as the actors and workers feed it: no Ray, no sleeping. Times are
multiples of 0.25 s, exact in binary, so the windows' edges are exact."""

import math

import pytest

from echoray.runtime.auto_echo import (
    AUTO_UPDATE_S,
    DECAY,
    STARVED_WAIT,
    AutoEcho,
    ConsumerWindow,
    window_r,
)
from echoray.runtime.throughput import Throughput

pytestmark = pytest.mark.unit
DT = 0.25


class Sim:
    """One actor and one worker. The actor is busy all the time at `up` rows per busy second
    and delivers `delivered` of them (the rest of its time passes between calls); the
    worker trains min(down, e * delivered rows) samples a second and waits the rest, and
    a fresh example is one of every e it trains."""

    def __init__(self, echo: AutoEcho, tp: Throughput):
        self.echo, self.tp, self.t = echo, tp, 0.0
        self.trained = self.step_s = self.wait_s = self.fresh = 0.0

    def advance(self, until: float, up: float, down: float, first_step_at: float | None = DT,
                report_every: float = DT, delivered: float = 1.0) -> None:
        """The actor reports every `report_every` seconds (one call), the worker every DT."""
        while self.t + DT <= until:
            self.t += DT
            if self.t % report_every == 0:
                self.tp.add_stage("upstream", "a0", up * report_every, report_every, at=self.t)  # rows, busy s
            if down:
                e = self.echo.factor
                trained = min(down, e * up * delivered) * DT
                self.trained, self.fresh = self.trained + trained, self.fresh + trained / e
                self.step_s += trained / down
                self.wait_s += DT - trained / down
            self.tp.set_worker(0, self.trained, self.step_s, self.wait_s, self.fresh)  # cumulative
            self.echo.on_heartbeat(self.t, first_step_at)

    def wait_fraction(self) -> float:
        return self.wait_s / self.t


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
    assert echo.factor == 8.0  # before any window: echo.start_factor, where null the cap
    sim.advance(3.0, up=100.0, down=400.0)
    # the first window opens at the first heartbeat after the first step (0.25 s) and each
    # closes AUTO_UPDATE_S later: updates at 0.75, 1.25, ..., 2.75
    assert [p["time"] for p in echo.history] == [0.75, 1.25, 1.75, 2.25, 2.75]
    assert all(p["measured_R"] == pytest.approx(4.0) for p in echo.history)
    assert echo.factor == pytest.approx(4.0)
    assert AUTO_UPDATE_S == 0.5


def test_auto_is_capped_and_falls_when_R_falls():
    echo, sim = make("auto")
    sim.advance(3.0, up=100.0, down=2000.0)  # R = 20, above the cap of 8: the worker waits
    assert echo.factor == 8.0 and echo.history[-1]["measured_R"] == pytest.approx(20.0)
    sim.advance(10.0, up=100.0, down=200.0)  # R = 2 from 3 s on: at e = 8 the worker never waits
    # a window that did not wait moves R to at most e * (1 - DECAY) = 0.8 e; the estimate
    # of log R (gain 1/3, never clipped, so it first decays from log 20 to below the cap)
    # brings e from 8 to 2.9 in 7 s, a step at a time, and never below R
    factors = [p["factor"] for p in echo.history if p["time"] > 3.0]
    assert all(b <= a for a, b in zip(factors, factors[1:], strict=False))
    assert 2.9 < echo.factor < 3.0
    sim.advance(18.0, up=100.0, down=200.0)
    assert 2.0 < echo.factor < 2.01 and echo.history[-1]["measured_R"] == pytest.approx(2.0)
    assert DECAY == 0.2


def test_starved_windows_measure_R_from_the_fresh_examples_the_workers_got():
    """The actors are busy at 100 rows a second but deliver 75 (their calls have gaps):
    R from busy time reads 4, the workers see 400 / 75 = 5.33. A window where they waited
    measures R from fresh examples per second; e hovers just below 5.33 (mean 4.97) and the worker
    waits 6.7% of the time (9.2% when e started at 1), where e = 4 (the busy-time R) would
    make it wait 25%."""
    echo, sim = make("auto")
    sim.advance(20.0, up=100.0, down=400.0, delivered=0.75)
    late = [p["factor"] for p in echo.history if p["time"] > 5.0]
    assert 4.5 < min(late) and max(late) <= 400 / 75 + 1e-9
    assert 4.9 < sum(late) / len(late) < 5.05
    assert sim.wait_fraction() == pytest.approx(0.0668, abs=0.001)


def test_a_window_is_starved_when_its_workers_waited_5_percent_of_it():
    down, busy_up = 400.0, 100.0  # busy-time R = 4
    quiet = ConsumerWindow(0.5, 0.02, 10.0)  # 4% waiting, 20 fresh a second
    assert window_r(down, busy_up, [quiet], factor=6.0) == pytest.approx(4.8)  # max(4, 0.8 e)
    assert window_r(down, busy_up, [quiet], factor=4.0) == pytest.approx(4.0)
    starved = ConsumerWindow(0.5, 0.025, 10.0)  # 5%
    assert window_r(down, busy_up, [starved], factor=6.0) == pytest.approx(400 / 20)
    # over the last windows together: a window with no fresh examples between two blocks
    assert window_r(down, busy_up, [starved, ConsumerWindow(0.5, 0.5, 0.0)], factor=6.0) == pytest.approx(40.0)
    assert window_r(down, busy_up, [ConsumerWindow(0.5, 0.5, 0.0)], factor=6.0) == pytest.approx(4.8)
    assert window_r(down, None, [starved], factor=6.0) == pytest.approx(20.0)  # no actor report yet
    assert window_r(None, busy_up, [starved], factor=6.0) is None
    assert STARVED_WAIT == 0.05


def test_a_resumed_factor_weighs_as_one_window():
    echo, sim = make("auto", resumed_factor=4.0)
    assert echo.factor == 4.0
    sim.advance(0.75, up=100.0, down=800.0)  # one window at R = 8: at e = 4 the worker waits half of it
    assert len(echo.history) == 1 and echo.history[0]["measured_R"] == pytest.approx(8.0)
    # the mean of log 4 and log 8: the second window's gain is 1/2
    assert echo.factor == pytest.approx(math.exp((math.log(4.0) + math.log(8.0)) / 2))


def test_before_the_first_step_nothing_is_measured():
    echo, sim = make("auto")
    sim.advance(3.0, up=100.0, down=0.0, first_step_at=None)  # actors read, no worker has stepped
    assert echo.factor == 8.0 and echo.history == []


def test_the_start_factor_is_a_guess_that_the_first_window_replaces():
    """Until the first window e is echo.start_factor (null: the cap). The first window's R is
    the measurement alone: the floor of a window that did not wait (0.8 e) comes from a
    factor that was measured, so a start at 8 on a source that keeps up (R = 1) is e = 1
    after one window, not 6.4 decaying over seconds."""
    echo, sim = make("auto")
    sim.advance(0.75, up=100.0, down=100.0)  # R = 1: at e = 8 the worker never waits
    assert [p["measured_R"] for p in echo.history] == [pytest.approx(1.0)]
    assert echo.factor == pytest.approx(1.0)
    echo, sim = make("auto", start_factor=2.0)
    assert echo.factor == 2.0
    sim.advance(0.75, up=100.0, down=600.0)  # R = 6: at e = 2 the worker waits, R from fresh per second
    assert echo.factor == pytest.approx(6.0)
    assert make(3.0, start_factor=2.0)[0].factor == 3.0  # a fixed factor ignores it


def test_windows_between_actor_reports_use_the_last_calls():
    """A text actor reports once per call, seconds apart: e is set 0.5 s after the first
    step from the reads before it, and every window's upstream is the last four calls'."""
    echo, sim = make("auto")
    sim.advance(4.0, up=100.0, down=0.0, first_step_at=None, report_every=1.0)  # 4 calls of 1 s
    # the worker never waits (the actors deliver 10x their busy rate), so every window's R
    # is the busy-time figure
    sim.advance(6.0, up=100.0, down=400.0, first_step_at=4.25, report_every=4.0, delivered=10.0)
    # windows close at 4.75, 5.25, 5.75, no actor report in any: upstream is the 4 calls'
    assert [p["time"] for p in echo.history] == [4.75, 5.25, 5.75]
    assert all(p["measured_R"] == pytest.approx(4.0) for p in echo.history)
    sim.advance(8.0, up=50.0, down=400.0, first_step_at=4.25, report_every=4.0, delivered=10.0)  # a 4 s call at 8.0
    # its 200 rows in 4 s with the three 1 s calls before it: 500 rows in 7 s
    assert echo.history[-1]["time"] == 7.75 and echo.history[-1]["measured_R"] == pytest.approx(4.0)
    sim.advance(8.5, up=50.0, down=400.0, first_step_at=4.25, report_every=4.0, delivered=10.0)
    assert echo.history[-1]["time"] == 8.25 and echo.history[-1]["measured_R"] == pytest.approx(400 / (500 / 7))
