"""The quasi-random searcher, the search outcome rule and study variants: pure, no Ray runs."""

import math

import numpy as np
import pytest
from scipy.stats import qmc

from echoray.config import SearchConfig, SearchParam
from echoray.config_load import ConfigError, load_config
from echoray.tune.outcome import summarize
from echoray.tune.searcher import QuasiRandomSearcher
from echoray.tune.space import SearchPoints, unit_points, unit_to_value
from echoray.tune.trial import trial_tree
from echoray.tune.variants import parse_variants

SPACE = {"optimizer.lr": {"low": 0.001, "high": 1.0, "scale": "log"},
         "optimizer.momentum": {"low": 0.01, "high": 0.3, "scale": "log", "one_minus": True},
         "model.width": {"choices": [16, 32, 64]}}


def search(**kw) -> SearchConfig:
    return SearchConfig(space=SPACE, **kw)


@pytest.mark.parametrize("sequence", ["halton", "sobol"])
def test_same_seed_same_points_and_other_seed_other_points(sequence):
    a = SearchPoints(search(), seed=3, trials=6, repeats=2, sequence=sequence)
    b = SearchPoints(search(), seed=3, trials=6, repeats=2, sequence=sequence)
    c = SearchPoints(search(), seed=4, trials=6, repeats=2, sequence=sequence)
    assert [a.point(k) for k in range(12)] == [b.point(k) for k in range(12)]
    assert [a.point(k) for k in range(12)] != [c.point(k) for k in range(12)]


def test_points_are_distinct_and_repeats_use_different_scrambles():
    p = SearchPoints(search(), seed=0, trials=8, repeats=3)
    units = np.array([p.unit(k) for k in range(len(p))])
    assert len({tuple(u) for u in units}) == 24
    assert len({p.scramble_seed(r) for r in range(3)}) == 3
    assert [p.point(k)["repeat"] for k in range(24)] == [k // 8 for k in range(24)]
    assert [p.point(k)["index"] for k in range(24)] == [k % 8 for k in range(24)]


@pytest.mark.parametrize("sequence", ["halton", "sobol"])
def test_lower_discrepancy_than_uniform_random(sequence):
    n, d = 16, 2
    quasi = [qmc.discrepancy(unit_points(sequence, d, n, seed)) for seed in range(5)]
    rng = np.random.default_rng(0)
    rand = [qmc.discrepancy(rng.random((n, d))) for _ in range(200)]
    # Every scrambled sequence beats 95% of uniform random sets of the same size.
    assert max(quasi) < np.percentile(rand, 5)


def test_log_one_minus_and_choice_mappings_are_exact():
    log = SearchParam(low=0.001, high=1.0, scale="log")
    assert unit_to_value(log, 0.0) == pytest.approx(0.001, rel=1e-12)
    assert unit_to_value(log, 0.5) == pytest.approx(math.sqrt(0.001), rel=1e-12)
    assert unit_to_value(log, 2 / 3) == pytest.approx(0.1, rel=1e-12)
    lin = SearchParam(low=2.0, high=4.0)
    assert unit_to_value(lin, 0.25) == 2.5
    one_minus = SearchParam(low=0.01, high=0.1, scale="log", one_minus=True)
    assert unit_to_value(one_minus, 0.0) == pytest.approx(0.99)
    assert unit_to_value(one_minus, 0.5) == pytest.approx(1 - math.sqrt(0.001))
    choices = SearchParam(choices=[16, 32, 64])
    assert [unit_to_value(choices, u) for u in (0.0, 0.33, 0.34, 0.999)] == [16, 16, 32, 64]


def test_points_land_inside_the_space():
    p = SearchPoints(search(), seed=1, trials=16, repeats=1)
    for k in range(16):
        v = p.point(k)["params"]
        assert 0.001 <= v["optimizer.lr"] <= 1.0
        assert 0.7 <= v["optimizer.momentum"] <= 0.99
        assert v["model.width"] in (16, 32, 64)


def test_searcher_hands_out_every_point_once_then_finishes():
    p = SearchPoints(search(), seed=0, trials=3, repeats=2)
    s = QuasiRandomSearcher(p)
    got = [s.suggest(f"t{i}") for i in range(6)]
    assert got == [p.point(k) for k in range(6)]
    assert s.suggest("t6") == QuasiRandomSearcher.FINISHED


def test_save_restore_continues_the_sequence(tmp_path):
    p = SearchPoints(search(), seed=0, trials=4, repeats=2)
    first = QuasiRandomSearcher(p)
    for i in range(3):
        first.suggest(f"t{i}")
    first.save(str(tmp_path / "state.json"))
    second = QuasiRandomSearcher(SearchPoints(search(), seed=0, trials=4, repeats=2))
    second.restore(str(tmp_path / "state.json"))
    assert [second.suggest(f"t{i}") for i in range(3, 8)] == [p.point(k) for k in range(3, 8)]
    other = QuasiRandomSearcher(SearchPoints(search(), seed=1, trials=4, repeats=2))
    with pytest.raises(ValueError, match="different search"):
        other.restore(str(tmp_path / "state.json"))


def test_trial_tree_sets_values_and_one_seed_per_repeat():
    base = load_config(None).model_dump(mode="json")
    p = SearchPoints(search(), seed=0, trials=2, repeats=2)
    trees = [trial_tree(base, p.point(k)) for k in range(4)]
    assert trees[0]["optimizer"]["lr"] == p.point(0)["params"]["optimizer.lr"]
    assert trees[0]["model"]["width"] == p.point(0)["params"]["model.width"]
    assert trees[0]["seed"] == trees[1]["seed"] != trees[2]["seed"] == trees[3]["seed"]


@pytest.mark.parametrize(("entry", "message"), [
    ("optimizer.lrr: {low: 0.1, high: 1}", "search.space.optimizer.lrr: not a config key"),
    ("optimizer: {low: 0.1, high: 1}", "search.space.optimizer: not a config key"),
    ("optimizer.lr: {low: 1, high: 0.1}", "low must be below high"),
    ("optimizer.lr: {low: 0, high: 1, scale: log}", "scale log needs low > 0"),
    ("optimizer.lr: {low: 0.1, high: 1, choices: [1]}", "either choices or low/high"),
    ("optimizer.lr: {high: 1}", "needs low and high"),
])
def test_bad_search_space_names_the_key(tmp_path, entry, message):
    path = tmp_path / "p.yaml"
    path.write_text("search:\n  space:\n    " + entry + "\n")
    with pytest.raises(ConfigError, match="search.space") as err:
        load_config(path)
    assert message in str(err.value) and str(path) in str(err.value)


def _trial(repeat, index, status, fresh=None, acc=0.9):
    return {"trial_key": f"r{repeat}-t{index}", "repeat": repeat, "index": index, "params": {"x": index},
            "seed": repeat, "status": status, "fresh_examples_to_target": fresh, "steps_to_target": None,
            "best_accuracy": acc, "mlflow_run_id": f"run{repeat}{index}"}


def test_best_trial_is_the_one_that_reached_the_target_with_fewest_fresh_examples():
    records = [_trial(0, 0, "reached", 900), _trial(0, 1, "reached", 700), _trial(0, 2, "not_reached"),
               _trial(1, 0, "error"), _trial(1, 1, "reached", 1100),
               _trial(2, 0, "not_reached"), _trial(2, 1, "error")]
    s = summarize(records, repeats=3)
    assert [r["best"]["trial_key"] if r["best"] else None for r in s["repeats"]] == ["r0-t1", "r1-t1", None]
    assert s["fresh_examples_to_target"] == {"mean": 900.0, "min": 700, "max": 1100, "n": 2}
    assert s["repeats_without_a_best"] == [2]
    assert [(r["reached"], r["not_reached"], r["errors"]) for r in s["repeats"]] == [(2, 1, 0), (1, 0, 1), (0, 1, 1)]


def test_study_variants_parse_and_reject_bad_ones():
    vs = parse_variants(["baseline,before_augment:2", "batch:4", "ba:8"])
    assert [(v.stage, v.factor, v.copies) for v in vs] == [
        ("none", 1.0, 1), ("before_augment", 2.0, 1), ("batch", 4.0, 1), ("none", 1.0, 8)]
    assert vs[3].overrides()["preprocess.augment.on"] == "worker"
    for bad in (["after_augment"], ["echo:2"], ["ba:2.5"], ["batch:0.5"], ["baseline,baseline"]):
        with pytest.raises(ValueError, match="--variants"):
            parse_variants(bad)


def test_only_one_cpu_worker_without_restarts_fits_local_mode():
    from echoray.train.local_mode import fits_local_mode

    base = load_config(None, ["scaling.max_failures=0"])
    assert fits_local_mode(base, use_gpu=False)
    assert not fits_local_mode(base, use_gpu=True)  # a GPU trial keeps Ray Train's device setup
    for other in ("scaling.num_workers=2", "scaling.max_failures=1",
                  "batch_augmentation.mode=grouped"):
        assert not fits_local_mode(load_config(None, ["scaling.max_failures=0", other]), use_gpu=False), other


def test_search_share_preprocessing_is_refused_naming_why():
    """The key is gone (shared preprocessing was removed): any value is refused by name, with why."""
    for value in ("true", "false"):
        with pytest.raises(ConfigError, match=r"search.share_preprocessing: this key was removed \(shared "
                                              r"preprocessing across trials is gone: .*docs/how-to/search.md\)"):
            load_config(None, [f"search.share_preprocessing={value}"])


def test_a_trial_interrupted_before_its_params_json_counts_as_unfinished(tmp_path):
    """Ctrl-C between Tune making a trial's folder and the trial writing params.json: the
    search reads it as unfinished (its --resume runs it), not as a missing-file crash."""
    import json
    from types import SimpleNamespace

    import pyarrow.fs as pafs

    from echoray.tune.search_run import _records

    points = SearchPoints(search(), 0, trials=2, repeats=1)
    started, done = tmp_path / "started", tmp_path / "done"
    started.mkdir()
    done.mkdir()
    (done / "params.json").write_text(json.dumps(points.point(1)))
    fs = pafs.LocalFileSystem()

    def result(path, metrics):
        return SimpleNamespace(config=None, metrics=metrics, error=None, path=str(path), filesystem=fs)

    final = {"final": True, "target_reached": True, "fresh_examples_to_target": 64}
    records, unfinished = _records([result(started, {}), result(done, final)], {"seed": 0}, points)
    assert unfinished == 1
    assert [(r["trial_key"], r["status"], r["fresh_examples_to_target"]) for r in records] == [("r0-t1", "reached", 64)]
