"""A run's collector in its own process (runtime/local_collector.py), without Ray: its
calls reach the actor's own class one at a time, and end with the run."""

import pickle
import threading

import pytest

from echoray.runtime.local_collector import CollectorEnded, LocalCollector
from echoray.train.worker_link import LocalLink, link_to


def test_calls_reach_the_collectors_own_class():
    c = LocalCollector(2.0, 8.0, n_train=100)
    assert c.call("echo_factor") == 2.0
    assert c.call("rows_ahead") is None  # no worker group yet, as the actor answers
    c.call("stage", "upstream", "a0", 64, 0.5, 64)
    assert c.call("stage_totals") == {"upstream": {"rows": 64, "busy_s": 0.5, "actors": 1}}


def test_calls_from_several_threads_are_taken_one_at_a_time():
    """An actor runs one call at a time; so does the lock: every report is counted."""
    c = LocalCollector(1.0, 8.0, n_train=100)

    def report(actor: str) -> None:
        for _ in range(500):
            c.call("stage", "upstream", actor, 3, 0.001, 3)

    threads = [threading.Thread(target=report, args=(f"a{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    totals = c.call("stage_totals")["upstream"]
    assert (totals["rows"], totals["actors"]) == (4 * 500 * 3, 4)


def test_an_ended_collector_refuses_every_call_by_name():
    c = LocalCollector(1.0, 8.0)
    c.end("the run ended")
    with pytest.raises(CollectorEnded, match=r"has ended \(the run ended\); heartbeat was called after it"):
        c.call("heartbeat", None)


def test_only_the_collectors_methods_and_only_in_this_process():
    c = LocalCollector(1.0, 8.0)
    with pytest.raises(AttributeError, match="RunCollector has no method 'no_such_call'"):
        c.no_such_call  # noqa: B018 - the attribute lookup is what is tested
    with pytest.raises(TypeError, match="cannot be sent to another"):
        pickle.dumps(c)


def test_the_worker_loop_calls_a_local_collector_directly():
    """link_to: no object-store reply per step where the collector is in process."""
    c = LocalCollector(3.0, 8.0)
    link = link_to(c)
    assert isinstance(link, LocalLink)
    assert link.live_factor() == 3.0 and link.ask("rows_ahead") is None
    link.send("stage", "upstream", "a0", 5, 0.1, 5)
    assert c.call("stage_totals")["upstream"]["rows"] == 5
    c.end("the run ended")
    with pytest.raises(CollectorEnded, match="echo_factor was called after it"):
        link.live_factor()  # a loop still running ends at its next step
