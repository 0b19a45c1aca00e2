import pytest

from echoray.runtime.throughput import Throughput


def test_rates_and_r_with_parallel_actors():
    t = Throughput()
    t.add_stage("upstream", "a1", 1000, 2.0)  # 500 ex/s per actor
    t.add_stage("upstream", "a2", 1000, 2.0)  # two actors in parallel: 1000 ex/s
    t.set_worker(0, 8000, 2.0)  # 4000 ex/s
    assert t.rates() == (1000.0, 4000.0)
    assert t.measured_r() == 4.0


def test_downstream_augmentation_and_workers_add_up():
    t = Throughput()
    t.add_stage("upstream", "r", 300, 1.0)  # 300 ex/s upstream
    t.add_stage("downstream", "r", 2000, 1.0)  # augmenting echoed rows: 2000 ex/s
    t.set_worker(0, 900, 1.0)
    t.set_worker(1, 900, 1.0)  # 1800 ex/s together
    assert t.rates() == (300.0, 1800.0)
    assert t.measured_r() == pytest.approx(6.0)
    t.add_stage("downstream", "r", 0, 9.0)  # now the augmentation is the slower part
    assert t.rates() == (300.0, 200.0)


def test_recent_window_uses_only_the_differences():
    t = Throughput()
    t.add_stage("upstream", "a", 100, 1.0)
    t.set_worker(0, 100, 1.0)
    before = t.snapshot()
    t.add_stage("upstream", "a", 100, 0.25)
    t.set_worker(0, 300, 1.1)  # cumulative: +200 examples in +0.1 s
    recent = t.since(before)
    assert recent.rates() == (pytest.approx(400.0), pytest.approx(2000.0))
    assert t.measured_r() == pytest.approx((300 / 1.1) / (200 / 1.25))


def test_workers_waits_and_fresh_examples_in_a_window():
    t = Throughput()
    t.set_worker(0, 100, 1.0, wait_s=0.5, fresh=100)
    t.set_worker(1, 100, 1.0, wait_s=0.1, fresh=100)
    before = t.snapshot()
    t.set_worker(0, 500, 2.0, wait_s=0.9, fresh=150)  # cumulative: waited 0.4 s more, 50 fresh
    t.set_worker(1, 500, 2.0, wait_s=0.1, fresh=160)  # no wait, 60 fresh
    assert t.since(before).consumer_totals() == (pytest.approx(0.2), 110, 2)  # mean wait per worker
    assert t.consumer_totals() == (pytest.approx(0.5), 310, 2)
    assert Throughput().consumer_totals() == (0.0, 0.0, 0)


def test_no_figures_yet():
    assert Throughput().measured_r() is None


def test_idle_or_dead_actors_do_not_inflate_the_upstream_rate():
    t = Throughput()
    t.add_stage("upstream", "a", 500, 1.0)
    t.add_stage("upstream", "b", 500, 1.0)  # two actors worked: 1000 ex/s
    t.add_stage("upstream", "idle", 0, 0.0)  # reported, never worked: not capacity
    t.set_worker(0, 4000, 1.0)
    assert t.rates() == (1000.0, 4000.0)
    before = t.snapshot()
    t.add_stage("upstream", "a", 250, 0.5)  # b died (or idles): only a works in the window
    t.set_worker(0, 6000, 1.5)
    assert t.since(before).rates() == (500.0, 4000.0)  # the old count-of-actors rule said 1000
    assert t.since(before).measured_r() == 8.0


def test_recent_stage_rate_reaches_back_to_the_last_calls_per_actor():
    t = Throughput()
    for at, (actor, rows, busy) in enumerate([("a", 100, 1.0), ("b", 300, 1.0), ("a", 100, 3.0), ("b", 100, 1.0)]):
        t.add_stage("upstream", actor, rows, busy, at=float(at))
    # the window after 2.5 holds one report (b's at 3): two per actor reach back to all four
    assert t.recent_stage_rate("upstream", since=2.5, min_reports=2) == pytest.approx(200 / 4.0 + 400 / 2.0)
    # one per actor: the last two reports, a's at 2 and b's at 3
    assert t.recent_stage_rate("upstream", since=2.5, min_reports=1) == pytest.approx(100 / 3.0 + 100 / 1.0)
    # enough reports in the window: the window alone
    assert t.recent_stage_rate("upstream", since=-1.0, min_reports=2) == pytest.approx(200 / 4.0 + 400 / 2.0)
    assert t.recent_upstream_rate(since=2.5, min_reports=1) == pytest.approx(100 / 3.0 + 100 / 1.0)
    assert Throughput().recent_upstream_rate(since=0.0, min_reports=4) is None


def test_a_thousand_actors_keep_every_actors_last_reports():
    """1,000 actors, each reporting once per 0.5 s window (runtime/collector_feed.py): the
    window's rate sums all of them, not the last REPORTS_KEPT reports' actors."""
    t = Throughput()
    for window in range(4):
        for i in range(1000):
            t.add_stage("upstream", f"a{i}", 50, 0.5, at=window * 0.5 + i * 1e-4)
    assert t.recent_stage_rate("upstream", since=1.49, min_reports=1) == pytest.approx(1000 * 100.0)
    assert t.recent_stage_rate("upstream", since=-1.0, min_reports=4) == pytest.approx(1000 * 100.0)
    assert len(t.reports["upstream"]) == 4000  # every report of the four windows
