"""benchmarks/shared_stream.py's bookkeeping: the held-out images a search reads, and
its trial results keyed by each pair's seed (--seed-per-pair gives every pair its own
search points, so a point is its seed and its trial key)."""

from types import SimpleNamespace

from helpers import load_benchmark

bench = load_benchmark("shared_stream")


def test_held_out_reads_are_once_per_group_shared_and_once_per_trial_separate():
    report = {"groups": [{"held_out": [{"rows": 200}]}, {"held_out": [{"rows": 200}, {"rows": 0}]}, {}]}
    assert bench.held_out_rows(report, [{}] * 8, 200) == 400
    assert bench.held_out_rows(None, [{}] * 8, 200) == 1600


def test_pair_seeds_and_points_keyed_by_them():
    assert [bench.pair_seed(SimpleNamespace(seed_per_pair=True), i) for i in range(3)] == [0, 1, 2]
    assert [bench.pair_seed(SimpleNamespace(seed_per_pair=False), i) for i in range(3)] == [0, 0, 0]

    def run(seed, shared, best):
        return {"where": "local", "seed": seed, "shared": shared, "trials": [{"trial_key": "r0-t0", "best_metric": best}]}

    got = bench.trial_results([run(0, True, 0.9), run(0, False, 0.88), run(1, False, 0.7), run(1, True, 0.7)], "local")
    assert got["points"] == {"0/r0-t0": {"separate": [0.88], "shared": [0.9], "shared_inside": 0},
                             "1/r0-t0": {"separate": [0.7], "shared": [0.7], "shared_inside": 1}}
    assert got["separate_noise"] == 0.0 and (got["shared_inside"], got["shared_values"]) == (1, 2)
    # a results file written before --seed-per-pair has no seed: its points are seed 0's
    legacy = {"where": "local", "shared": True, "trials": [{"trial_key": "r0-t0", "best_metric": 0.9}]}
    assert set(bench.trial_results([legacy, run(0, False, 0.9)], "local")["points"]) == {"0/r0-t0"}
