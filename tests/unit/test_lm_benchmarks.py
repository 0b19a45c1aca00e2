"""The language-model benchmarks' arithmetic (benchmarks/lm*.py): fresh tokens to target
read between evaluations, what a repeated token is worth and the statement made from it,
the latency calibration for R, auto's goals, batch augmentation's table, and the driver's
scales. The runs themselves are exercised by `benchmarks/lm.py --smoke`."""

from __future__ import annotations

import pytest

from helpers import load_benchmark

lm_common = load_benchmark("lm_common")
f5 = load_benchmark("lm_echo_figure5")
auto = load_benchmark("lm_auto_echo")
ba = load_benchmark("lm_ba")
driver = load_benchmark("lm")


def test_evals_for_spaces_evaluations_over_the_budget_at_most_one_per_step():
    c = lm_common.Corpus(sequences=10_000, seq_len=64, pieces=500, documents=300, bytes=650_000)
    assert c.tokens == 640_000
    assert lm_common.evals_for(c, 16, 1_000, 10) == 100  # 10 evaluations in a tenth of an epoch
    assert lm_common.evals_for(c, 64, 100, 40) == 156  # capped: 10,000 // 64 steps in an epoch
    assert lm_common.evals_for(c, 16, 20_000, 1) == 1


def point(b, e, median, budget=1000.0):
    """A Figure 5 point of 3 seeds that all reached the target at `median` (None: all missed)."""
    value = median if median is not None else budget
    return {"batch_size": b, "factor": e, "seeds": 3, "reached": 3 if median is not None else 0, "n": 3,
            "median": value, "min": value, "max": value, "budget_tokens": budget,
            "median_reached": median is not None}


def test_worth_of_a_repeat_and_the_statement_come_from_the_data():
    # batch 16: on the line up to e = 2 (w = 1), w = 0.5 at 4, 1/7 at 8; batch 64: always on it
    pts = [point(16, 1, 800.0), point(16, 2, 400.0), point(16, 4, 320.0), point(16, 8, 400.0),
           point(64, 1, 1600.0), point(64, 2, 800.0), point(64, 4, 400.0), point(64, 8, None)]
    v16, v64 = f5.worth(pts, 0.5)
    assert [round(w["worth"], 4) if w["worth"] is not None else None for w in v16["worth"]] == [None, 1.0, 0.5, 0.1429]
    assert v16["first_e_below"] == 8 and v16["most_useful_e"] == 4
    assert v16["statement"] == ("batch 16: from e = 8 on, a repeated token is worth less than 0.5 of a fresh one; "
                                "the fewest fresh tokens to target at e = 4 "
                                "(reached: e = 1 3/3, e = 2 3/3, e = 4 3/3, e = 8 3/3)")
    # batch 64: on the line up to 4; e = 8 did not reach the target within 1,000 fresh tokens,
    # so its repeats were worth less than (1600 / 1000 - 1) / 7
    assert v64["worth"][-1]["worth_at_most"] == pytest.approx(0.6 / 7) and v64["worth"][-1]["worth"] is None
    assert v64["first_e_below"] == 8 and v64["most_useful_e"] == 4 and v64["unreached_factors"] == [8]
    # with a budget of 200 the bound says nothing (w < 1): the statement stops at e = 4
    (v,) = f5.worth([point(64, 1, 1600.0), point(64, 2, 800.0), point(64, 4, 400.0), point(64, 8, None, 200.0)], 0.5)
    assert v["first_e_below"] is None
    assert v["statement"] == ("batch 64: up to e = 4 a repeated token is worth at least 0.5 of a fresh one "
                              "(e = 8 did not reach the target within its budget); "
                              "the fewest fresh tokens to target at e = 4 "
                              "(reached: e = 1 3/3, e = 2 3/3, e = 4 3/3, e = 8 0/3)")
    (v,) = f5.worth([point(64, 1, 1600.0), point(64, 2, 800.0)], 0.5)
    assert v["statement"].startswith("batch 64: up to e = 2 a repeated token is worth at least 0.5 of a fresh one "
                                     "(the largest tested)")
    none = f5.worth([point(32, 1, None), point(32, 2, 100.0)], 0.5)[0]
    assert none["statement"] == "batch 32: e = 1 did not reach the target, so nothing is compared"


def test_points_are_medians_over_every_seed_with_misses_at_their_budget():
    def runs(values):
        return [{"batch_size": 16, "factor": 2.0, "seed": s, "reached": v is not None,
                 "fresh_tokens_or_budget": v if v is not None else 500.0, "budget_tokens": 500}
                for s, v in enumerate(values)]

    (p,) = f5.points(runs([100.0, 300.0, None]))
    assert (p["seeds"], p["reached"], p["median"], p["min"], p["max"]) == (3, 2, 300.0, 100.0, 500.0)
    assert p["median_reached"] and p["budget_tokens"] == 500
    (p,) = f5.points(runs([100.0, None, None]))  # most missed: the median is the budget, a bound
    assert (p["reached"], p["median"], p["median_reached"]) == (1, 500.0, False)


def test_a_run_at_e_reads_fewer_fresh_tokens_where_it_would_train_past_the_cap():
    a = driver.parse(["--f5-budget-tokens", "1000", "--f5-trained-cap", "4"])
    assert [f5.fresh_budget(a, e) for e in (1, 2, 4, 8, 16)] == [1000, 1000, 1000, 500, 250]


def test_latency_for_r_inverts_the_probe():
    # a sequence costs c = 1 ms of compute plus k = 0.1 requests of latency L:
    # at L0 = 2 ms upstream is 1 / (0.001 + 0.0002) = 833.3/s; downstream 1000/s
    up0 = 1 / (0.001 + 0.1 * 0.002)
    latency = auto.latency_for(5.0, 2.0, up0, 1000.0, 0.1)
    assert latency == pytest.approx(40.0)  # 1 / (0.001 + 0.1 * 0.040) = 200/s = 1000 / 5
    assert auto.latency_for(0.5, 2.0, up0, 1000.0, 0.1) == 0.0  # faster than compute allows: none


def test_bandwidth_for_r_inverts_the_probe():
    # compute as above: 1 ms a sequence beyond the probe's 0.1 requests of 2 ms; 65 bytes a
    # sequence must take 1000 / 5 = 200/s, so 4 ms of transfer each: 65 / 0.004 B/s
    up0 = 1 / (0.001 + 0.1 * 0.002)
    assert auto.bandwidth_for(5.0, 2.0, up0, 1000.0, 0.1, 65.0) == pytest.approx(0.01625)
    assert auto.bandwidth_for(0.5, 2.0, up0, 1000.0, 0.1, 65.0) is None  # compute alone is slower: no limit


def test_the_store_override_charges_per_byte_or_per_request():
    c = lm_common.Corpus(sequences=1_000, seq_len=64, pieces=100, documents=100, bytes=65_000)
    probe = {"upstream_examples_per_s": 1 / (0.001 + 0.1 * 0.002), "downstream_examples_per_s": 1000.0}
    a = driver.parse(["--part", "auto", "--auto-probe-ms", "2"])
    assert a.auto_store == "bandwidth"
    store = auto.store_for(a, c, probe)
    assert store == {"latency_ms": 0.0, "bandwidth_mb_s": pytest.approx(0.01625)}
    assert auto.remote(store) == ["source.kind=slow_store:SlowStore",
                                  f"source.options={{inner: text, latency_ms: 0.0, bandwidth_mb_s: {store['bandwidth_mb_s']}, "
                                  "read_concurrency: 1}"]
    a = driver.parse(["--part", "auto", "--auto-probe-ms", "2", "--auto-store", "latency"])
    store = auto.store_for(a, c, probe)
    assert store == {"latency_ms": pytest.approx(40.0), "bandwidth_mb_s": None}
    assert auto.remote(store) == ["source.kind=slow_store:SlowStore", "source.options={inner: text, latency_ms: 40.0, read_concurrency: 1}"]


def test_a_checked_store_is_rescaled_by_measured_over_asked_r():
    # R = downstream / upstream and upstream is the store's rate: a store that gave R 7.5
    # where 5 was asked is 1.5x too slow, so its transfer rate rises 1.5x (per byte) or its
    # latency falls to 5 / 7.5 of it (per request); R 2.5 asks the opposite
    per_byte = {"latency_ms": 0.0, "bandwidth_mb_s": 0.01}
    assert auto.rescaled(per_byte, 7.5, 5.0) == {"latency_ms": 0.0, "bandwidth_mb_s": pytest.approx(0.015)}
    assert auto.rescaled(per_byte, 2.5, 5.0) == {"latency_ms": 0.0, "bandwidth_mb_s": pytest.approx(0.005)}
    per_request = {"latency_ms": 30.0, "bandwidth_mb_s": None}
    assert auto.rescaled(per_request, 7.5, 5.0) == {"latency_ms": 20.0, "bandwidth_mb_s": None}
    assert auto.rescaled(per_request, 2.5, 5.0) == {"latency_ms": 60.0, "bandwidth_mb_s": None}
    for unmeasured in (None, 0.0):  # a check run that measured no R leaves the store as it was
        assert auto.rescaled(per_byte, unmeasured, 5.0) is per_byte


def test_auto_goals_against_e1_and_the_best_fixed_factor():
    def row(f, t):
        return {"factor": f, "time_to_target": {"median_from_start_s": t}}

    g = auto.goals([row("1", 100.0), row("2", 52.0), row("4", 27.0), row("8", 30.0), row("auto", 28.0)])
    assert g["best_fixed_factor"] == "4"
    assert g["auto_speedup_vs_e1"] == pytest.approx(100 / 28) and g["speedup_met"]
    assert g["auto_time_over_best_fixed"] == pytest.approx(28 / 27) and g["within_best_met"]
    g = auto.goals([row("1", 100.0), row("4", 27.0), row("auto", None)])
    assert g["auto_speedup_vs_e1"] is None and not g["speedup_met"] and not g["within_best_met"]


def test_ba_rows_compare_each_m_with_m1_of_the_same_seed():
    runs = [{"copies": m, "seed": s, "bits_per_byte": v, "steps": 50, "wall_s": 1.0}
            for m, s, v in ((1, 0, 3.0), (1, 1, 3.2), (2, 0, 2.9), (2, 1, 3.0), (4, 0, 2.8))]
    t = {r["copies"]: r for r in ba.rows(runs)}
    assert t[1]["vs_m1"]["mean"] == 0.0
    assert t[2]["vs_m1"]["mean"] == pytest.approx(-0.15) and t[2]["bits_per_byte"]["n"] == 2
    assert t[4]["vs_m1"]["n"] == 1 and t[4]["vs_m1"]["mean"] == pytest.approx(-0.2)
    assert t[2]["steps"] == [50]


def test_the_driver_takes_the_smoke_scale_and_knobs_override_it():
    a = driver.parse(["--smoke", "--part", "figure5", "ba", "--f5-factors", "1", "2", "--ba-seeds", "3"])
    assert a.part == ["figure5", "ba"] and a.f5_factors == [1.0, 2.0] and a.ba_seeds == [3]
    assert a.f5_seeds == driver.SCALE["f5_seeds"][1] and a.f5_budget_tokens == driver.SCALE["f5_budget_tokens"][1]
    full = driver.parse([])
    assert full.part == list(driver.PART_NAMES)
    assert full.f5_factors == [1, 2, 4, 8, 16] and full.f5_batch_sizes == [16, 64] and full.f5_seeds == [0, 1, 2]
    assert full.ba_copies == [1, 2, 4] and full.auto_r == 5.0 and "auto" in full.auto_factors
    assert set(driver.SCALE) == {k for k in driver.SCALE if k.split("_")[0] in ("f5", "auto", "ba", "pipe", "index")}
