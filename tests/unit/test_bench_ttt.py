"""Time to target as the benchmarks read it (benchmarks/ttt.py): a pilot's target, wall clock
to the crossing evaluation, misses at their budget."""

import pytest

from helpers import load_benchmark

ttt = load_benchmark("ttt")


def evals(values, key="accuracy"):
    return [{"evaluation": i + 1, key: v} for i, v in enumerate(values)]


def test_the_pilot_takes_the_evaluation_nearest_70_percent_of_its_budget():
    got = ttt.pilot_value(evals([0.1 * i for i in range(1, 11)]), "accuracy")  # 10 evaluations
    assert (got["at_evaluation"], got["of"], got["seed"]) == (7, 10, 100) and got["target"] == pytest.approx(0.7)
    assert ttt.pilot_value(evals([4.9, 4.5, 4.2], "bits_per_byte"), "bits_per_byte")["at_evaluation"] == 2
    assert ttt.pilot_value(evals([0.5]), "accuracy")["at_evaluation"] == 1
    with pytest.raises(ValueError, match="no evaluation"):
        ttt.pilot_value([], "accuracy")


def summary(reached, to_target, wall, first=5.0, n=12):
    return {"target_reached": reached, "time_to_target_s": to_target if reached else None, "wall_s": wall,
            "time_to_first_step_s": first, "history": [{}] * n}


def test_a_miss_counts_at_its_budget_and_the_first_step_is_taken_out():
    hit = ttt.times(summary(True, 30.0, 50.0))
    assert (hit["time_to_target_or_budget_s"], hit["from_first_step_or_budget_s"]) == (30.0, 25.0)
    miss = ttt.times(summary(False, None, 50.0))
    assert (miss["target_reached"], miss["time_to_target_or_budget_s"], miss["evaluations_made"]) == (False, 50.0, 12)


def test_a_row_is_the_medians_with_misses_in_against_e1():
    base = [ttt.times(summary(True, t, 60.0)) for t in (40.0, 44.0, 50.0)]
    runs = [ttt.times(summary(True, 20.0, 60.0)), ttt.times(summary(False, None, 60.0)),
            ttt.times(summary(True, 22.0, 60.0))]
    row = ttt.row(runs, base)
    assert (row["runs"], row["reached"], row["median_from_start_s"]) == (3, 2, 22.0)
    assert row["speedup_from_start"] == pytest.approx(44.0 / 22.0)
    assert row["median_from_first_step_s"] == 17.0 and row["speedup_from_first_step"] == pytest.approx(39.0 / 17.0)
    # two misses of three: the median is the budget, the speed-up what the budget allows
    worse = ttt.row([runs[1], runs[1], runs[0]], base)
    assert worse["median_from_start_s"] == 60.0 and worse["speedup_from_start"] == pytest.approx(44.0 / 60.0)
