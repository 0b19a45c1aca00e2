"""`echo.factor: auto`'s control law, over the live throughput figures.

Measured: R = downstream / upstream rate in sample units from busy time
(runtime/throughput.py): fresh rows per busy second of the preprocessing actors that
worked in the window, summed; trained samples per train-step second of the workers,
summed. How often: every AUTO_UPDATE_S (0.5 s), on the heartbeat after it, over the window
since the last update (the first window opens after the first step; one without a worker's
step stays open). Upstream: the actors' reports in the window, reaching back to the last
UPSTREAM_MIN_REPORTS per actor where it holds fewer (runtime/throughput.py
recent_stage_rate); before the first window these are the reads before the first step.
An actor's report covers its calls since its last, one every 0.5 s at most
(runtime/collector_feed.py), and a text call reading units behind a slow store takes
8-9 s with rows that vary by call (benchmarks/lm_auto_echo.py): waiting for a report in
every window set e at most once per call (a run that reached its target after 28 s of
training trained at e = 1 for its first 10 s), and one call's rate swung the window R
between 3 and 16 where the run's was 8. Starvation: the actors' busy time leaves out
what passes between their calls (scheduling, a call's rows leaving as one
block), so the busy-time R can understate what the workers see: on the text
benchmark, while read pacing (since removed) held calls back, the actors' busy rate at
e = 1 was 131-171 sequences/s while the workers trained 98-111 fresh a second, and e = 8
stepped 5.6x as fast as e = 1 where the busy-time R read 4.8
(benchmarks/results/lm_auto_echo.json at commit 7a0aa61). So a window is read by what the workers did
(window_r): where they waited for data (STARVED_WAIT of the window's wall time or more,
over the last DELIVERED_WINDOWS windows), the upstream was the limit and R is the
downstream rate over the fresh examples they got per second; where they did not, the
upstream kept up at e, which shows only that R <= e: R is the busy-time figure but no
lower than e * (1 - DECAY), so e falls towards it a step at a time and the first window
that waits again brings it back. Damping: the state is an estimate of log R, never clipped
(data/echo.py update_r_estimate): the mean of log R over the first windows (the first
sets it outright), then an exponential average with gain 1/3; e = the estimate's R within
[1, echo.max_factor] (auto_factor), so e falls when R falls, and at R near the cap windows
above it count as much as those below. Where e is applied: the worker takes it without
waiting (worker/link.py live_factor) for each fresh batch it takes from the stream
(train/consumption_echo.py), and the preprocessing actors that make the copies take it
from their reports' replies, never waiting (runtime/collector_feed.py). Start: until the
first window e is the cap (echo.max_factor; `start_factor` in tests and benchmarks), and that first
window's R is its measurement alone (no 0.8 e floor from a factor that was a guess). At a
start of 1 the worker ate its first shuffle pool of fresh rows (400 sequences) in half a
second on the text benchmark, then waited or trained spare copies (1,692-1,776 of them a
run) and needed more fresh sequences to the target than e = 8 (benchmarks/lm_auto_echo.py);
a start too high costs at most one window of extra copies. A fixed factor is the same
object with `auto` false: its factor never moves. Pure given the clock: the collector passes `now` in.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from echoray.data.echo import REstimate, auto_factor, update_r_estimate
from echoray.runtime.throughput import Throughput

# 0.5 s: an actor reports at most this often (runtime/collector_feed.py REFRESH_S), and e
# is set from R 0.5 s after the first step.
AUTO_UPDATE_S = 0.5
# 4 reports per actor: where calls are short, an actor's reports 0.5 s apart (the last 2 s);
# where a call takes seconds, the last four calls' ratio of summed rows to busy time.
UPSTREAM_MIN_REPORTS = 4
# A window whose workers waited for data this share of its wall time or more was starved
# (a step waits a little for its batch even when the stream keeps up: under 1% on digits).
STARVED_WAIT = 0.05
# Starvation and fresh examples per second over the last 4 windows (2 s): a text call's
# rows arrive as one block every few seconds, and one window can fall between two.
DELIVERED_WINDOWS = 4
# A window that did not wait moves R down to at most e * (1 - DECAY): from e = 8 to 2 in
# about ten seconds at the estimate's gain of 1/3.
DECAY = 0.2


@dataclass(frozen=True)
class ConsumerWindow:
    """What the workers did in one window: its wall time, their mean wait, fresh examples."""
    wall_s: float
    wait_s: float
    fresh: float


def window_r(down: float | None, busy_up: float | None, recent: list[ConsumerWindow],
             factor: float) -> float | None:
    """One window's R (see the module's docstring): `down` the workers' trained samples per
    step-second, `busy_up` the actors' rows per busy second, `recent` the last windows, the
    current one last, `factor` the e the workers trained at. None: nothing to measure."""
    if not down:
        return None
    wall = sum(w.wall_s for w in recent)
    fresh = sum(w.fresh for w in recent)
    if wall > 0 and sum(w.wait_s for w in recent) >= STARVED_WAIT * wall and fresh > 0:
        delivered_r = down / (fresh / wall)
        return max(delivered_r, down / busy_up) if busy_up else delivered_r
    if not busy_up:
        return None
    return max(down / busy_up, factor * (1 - DECAY))


class AutoEcho:
    def __init__(self, factor: float | str, max_factor: float, throughput: Throughput, now: float,
                 resumed_factor: float | None = None, start_factor: float | None = None):
        self.auto = factor == "auto"
        # auto: a guess until the first window (the cap unless a benchmark passes start_factor); not a
        # measurement, so the first window's R is not held up by it (window_r's floor)
        self.factor = (max_factor if start_factor is None else start_factor) if self.auto else float(factor)
        self.max_factor = max_factor
        self.throughput = throughput  # the collector's, shared: it also gives the run's rates
        self.history: list[dict[str, float]] = []  # {"time", "factor", "measured_R"} per change
        self.r_estimate: REstimate | None = None
        self._recent: deque[ConsumerWindow] = deque(maxlen=DELIVERED_WINDOWS)
        self._window, self._window_at = throughput.snapshot(), now
        if self.auto and resumed_factor:
            self.factor = float(resumed_factor)
            # the saved factor weighs as one window: the first new one moves e half-way
            self.r_estimate = REstimate(float(math.log(self.factor)), 1)

    def on_heartbeat(self, now: float, first_step_at: float | None) -> None:
        """After a worker's heartbeat was added to the throughput figures."""
        if not self.auto:
            return
        if first_step_at is not None and self._window_at < first_step_at:
            # the first window opens after the first step (its warm-up is not the step's rate)
            self._window, self._window_at = self.throughput.snapshot(), now
        elif now - self._window_at >= AUTO_UPDATE_S:
            self._update(now)

    def _update(self, now: float) -> None:
        window = self.throughput.since(self._window)
        wait_s, fresh, _ = window.consumer_totals()
        current = ConsumerWindow(now - self._window_at, wait_s, fresh)
        up = self.throughput.recent_upstream_rate(self._window_at, UPSTREAM_MIN_REPORTS)
        measured = self.factor if self.r_estimate is not None else 1.0  # the start factor was a guess
        r = window_r(window.rates()[1], up, [*self._recent, current][-DELIVERED_WINDOWS:], measured)
        if r is not None:  # else the window stays open
            self._recent.append(current)
            self.r_estimate = update_r_estimate(self.r_estimate, r)
            self.factor = auto_factor(self.r_estimate, self.max_factor)
            self.history.append({"time": now, "factor": self.factor, "measured_R": r})
            self._window, self._window_at = self.throughput.snapshot(), now
