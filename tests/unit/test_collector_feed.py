"""runtime/collector_feed.py without Ray: a preprocessing actor's calls never wait on the
collector, reach it at most every REFRESH_S once training runs, and leave its figures exact.
The collector is the actor's own class; `Wire` carries calls to it in order, as an actor
handle does, and delivers them only when the test says so (a reply still in flight)."""

from concurrent.futures import Future

import pytest

from echoray.records import Heartbeat
from echoray.runtime.collector import RunCollector
from echoray.runtime.collector_feed import REFRESH_S, CollectorFeed, Refreshed

Collector = RunCollector.__ray_actor_class__  # the plain class behind the actor


class Clock:
    def __init__(self, t: float = 100.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


class Wire:
    """Calls to `target` queued in the order sent; `deliver` runs them and answers."""

    def __init__(self, target):
        self.target, self.queued, self.sent = target, [], []

    def send(self, method: str, *args) -> Future:
        fut = Future()
        self.queued.append((fut, method, args))
        self.sent.append(method)
        return fut

    def deliver(self) -> None:
        queued, self.queued = self.queued, []
        for fut, method, args in queued:
            fut.set_result(getattr(self.target, method)(*args))


def feed_on(collector, clock, wall=None, n_train=100, max_bad=0.05, factor=1.0):
    wire = Wire(collector)
    feed = CollectorFeed(wire.send, "a0", factor, n_train, max_bad, clock=clock, wall=wall or clock)
    return feed, wire


def start_training(c) -> None:
    c.attempt_started(0, 0)
    c.heartbeat(Heartbeat(rank=0, steps=1, samples=32, step_s=0.1))


def done(value) -> Future:
    fut = Future()
    fut.set_result(value)
    return fut


def test_refreshed_asks_at_most_every_interval_and_never_waits():
    clock, asked = Clock(), []

    def request() -> Future:
        asked.append(Future())
        return asked[-1]

    r = Refreshed(request, reply=1.0, every_s=0.5, clock=clock)
    assert r.poll() == 1.0 and len(asked) == 1  # the first poll asks at once
    clock.t += 0.6
    assert r.poll() == 1.0 and len(asked) == 1  # one in flight: no second, the old value
    asked[0].set_result(2.0)
    assert r.poll() == 2.0 and len(asked) == 2  # its reply is taken, the next asked (0.6 s on)
    asked[1].set_result(3.0)
    clock.t += 0.4
    assert r.poll() == 3.0 and len(asked) == 2  # 0.4 s since the last ask: none
    clock.t += 0.1
    assert r.poll() == 3.0 and len(asked) == 3
    asked[2].set_exception(RuntimeError("the collector is gone"))
    assert r.poll(urgent=True) == 3.0 and len(asked) == 4  # a failed ask keeps the last reply
    assert r.poll(urgent=True) == 3.0 and len(asked) == 5  # urgent: asked even with one in flight


def test_urgent_asks_do_not_hide_the_reply_in_flight():
    """An urgent ask while one is out is sent, but the reply taken is the oldest's: when
    each urgent ask replaced the one awaited, no reply landed while asks came faster than
    answers, and an actor that waited for 'training started' sent every block."""
    clock, asked = Clock(), []

    def request() -> Future:
        asked.append(Future())
        return asked[-1]

    r = Refreshed(request, reply="not started", every_s=0.5, clock=clock)
    for _ in range(3):
        r.poll(urgent=True)
    assert len(asked) == 3
    asked[0].set_result("started")  # the first answer comes while the later asks are out
    assert r.poll() == "started"


def test_reports_are_sent_per_call_until_training_starts_then_at_most_every_interval():
    c, clock = Collector(1.0, 8.0, n_train=100), Clock()
    feed, wire = feed_on(c, clock)
    for _ in range(3):  # before the first step: each call's reads as they happen
        feed.stage("upstream", 10, 0.01, reads=10)
        feed.stage("downstream", 30, 0.005)  # no reads: kept for the next send
        clock.t += 0.01
    assert wire.sent == ["reports"] * 3
    wire.deliver()
    assert c.source_reads == 30 and c.stage_totals()["downstream"]["rows"] == 60  # the last call's is kept
    start_training(c)
    feed.stage("upstream", 10, 0.01, reads=10)  # sent: the reply that says training started has not come
    wire.deliver()
    calls = 200  # 200 calls in 2 s after the start: 100 blocks a second
    for _ in range(calls):
        clock.t += 0.01
        feed.stage("upstream", 10, 0.01, reads=10)
        feed.stage("downstream", 30, 0.005)
        wire.deliver()
    assert wire.sent.count("reports") - 4 <= 2.0 / REFRESH_S + 1
    feed.close()
    wire.deliver()
    totals = c.stage_totals()
    assert totals["upstream"] == {"rows": 10 * (calls + 4), "busy_s": pytest.approx(0.01 * (calls + 4)), "actors": 1}
    assert totals["downstream"]["rows"] == 30 * (calls + 3) and c.source_reads == 10 * (calls + 4)


def test_the_first_read_is_dated_when_it_began_not_when_it_was_reported():
    c, clock, wall = Collector(1.0, 8.0, n_train=100), Clock(), Clock(5000.0)
    feed, wire = feed_on(c, clock, wall)
    feed.stage("upstream", 10, 0.25, reads=10)
    wall.t += 3.0
    wire.deliver()
    assert c.first_read_at == 5000.0 - 0.25


def test_the_factor_is_the_newest_the_collector_answered_without_waiting():
    c, clock = Collector("auto", 8.0, n_train=100, start_factor=2.0), Clock()
    feed, wire = feed_on(c, clock, factor=2.0)
    start_training(c)
    assert feed.factor() == 2.0
    c.echo.factor = 5.0  # the collector's law moved e
    assert feed.factor() == 2.0  # its reply has not come: the call goes on with the last value
    wire.deliver()
    assert feed.factor() == 5.0
    c.echo.factor = 3.0
    clock.t += REFRESH_S
    feed.factor()
    wire.deliver()
    assert feed.factor() == 3.0


def test_an_actors_own_bad_files_over_the_budget_fail_at_once_with_the_collectors_message():
    c, clock = Collector(1.0, 8.0, n_train=100, max_bad_fraction=0.01), Clock()  # 1 allowed
    feed, wire = feed_on(c, clock, max_bad=0.01)
    assert feed.bad([(3, "a.png", "truncated")]) is None
    assert wire.sent == ["reports"]  # the one within budget is sent when found
    message = feed.bad([(3, "a.png", "truncated"), (4, "b.png", "not an image")])
    assert message == ("2 undecodable training image(s), more than source.max_bad_fraction=0.01 of 100 "
                       "allows (1): a.png (truncated); b.png (not an image)")
    assert wire.sent == ["reports"]  # decided here, without a reply
    wire.deliver()
    assert c.poll(0)["bad_examples"] == 1


def test_the_collector_decides_over_all_actors_and_each_one_hears_it_at_its_next_call():
    c, clock = Collector(1.0, 8.0, n_train=100, max_bad_fraction=0.01), Clock()
    first, wire1 = feed_on(c, clock, max_bad=0.01)
    second, wire2 = feed_on(c, clock, max_bad=0.01)
    assert first.bad([(3, "a.png", "truncated")]) is None
    assert first.bad([(3, "a.png", "truncated")]) is None  # known: not sent again
    wire1.deliver()
    assert wire1.sent == ["reports"] and c.poll(0)["bad_examples"] == 1 and first.failure() is None
    assert second.bad([(9, "c.png", "truncated")]) is None  # one each: within this actor's budget
    assert second.failure() is None  # not answered yet: the call goes on
    wire2.deliver()
    expected = ("2 undecodable training image(s), more than source.max_bad_fraction=0.01 of 100 allows (1): "
                "a.png (truncated); c.png (truncated)")
    assert c.poll(0)["fatal"] == {"kind": "data", "message": expected} and c.is_aborted()
    assert second.failure() == expected
    first.stage("upstream", 5, 0.01, reads=5)  # the first actor's next report brings it the verdict
    wire1.deliver()
    assert first.failure() == expected


def test_a_fatal_error_is_held_by_the_collector_before_the_call_raises():
    c = Collector(1.0, 8.0, n_train=100)
    feed = CollectorFeed(lambda method, *args: done(getattr(c, method)(*args)), "a0", 1.0, 100, 0.0)
    feed.fatal("undecodable: x.png")
    assert c.poll(0)["fatal"] == {"kind": "data", "message": "undecodable: x.png"}


def test_close_sends_what_is_left_and_a_collector_already_gone_is_no_error():
    c, clock = Collector(1.0, 8.0, n_train=100), Clock()
    feed = CollectorFeed(lambda method, *args: done(getattr(c, method)(*args)), "a0", 1.0, 100, 0.0, clock=clock)
    start_training(c)
    feed.stage("upstream", 7, 0.01, reads=7)
    feed.stage("upstream", 7, 0.01, reads=7)  # within the interval: kept
    assert c.source_reads == 7
    feed.close()
    assert c.source_reads == 14

    def gone(method, *args) -> Future:
        fut = Future()
        fut.set_exception(RuntimeError("actor died"))
        return fut

    dead = CollectorFeed(gone, "a1", 1.0, 100, 0.0, clock=clock)
    dead.stage("upstream", 7, 0.01, reads=7)
    dead.stage("upstream", 7, 0.01, reads=7)
    dead.close()  # no error


def test_without_a_collector_the_budget_is_the_actors_own():
    feed = CollectorFeed(None, "a0", 1.0, 100, 0.02)  # 2 allowed
    assert feed.bad([(1, "a.png", "truncated"), (2, "b.png", "truncated")]) is None
    assert feed.bad([(3, "c.png", "truncated")]).startswith("3 undecodable training image(s)")
    feed.stage("upstream", 5, 0.1, reads=5)
    assert feed.factor() == 1.0 and feed.failure() is None
    feed.close()


def test_a_fatal_error_the_collector_cannot_take_leaves_the_calls_own_error():
    def gone(method, *args) -> Future:
        raise RuntimeError("actor died")

    CollectorFeed(gone, "a0", 1.0, 100, 0.0).fatal("undecodable: x.png")  # returns: the call raises its own
