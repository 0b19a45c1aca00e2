"""echoray.tune.QuasiRandomSearcher with a plain Ray Tune Tuner (no echoray pipeline): every
point of the search runs once, in order, with the param_space's constants merged in."""

from ray import tune

import echoray.tune as et


def test_plain_tuner_runs_every_quasi_random_point_once(local_ray, tmp_path):
    def objective(config):  # nested: pickled by value (Tune's workers cannot import this test module)
        tune.report({"score": -(config["lr"] - 0.1) ** 2, "width": config["width"]})

    space = {"lr": {"low": 1e-3, "high": 1.0, "scale": "log"}, "width": {"choices": [16, 32, 64]}}
    searcher = et.QuasiRandomSearcher.from_space(space, trials=4, repeats=2, seed=3)
    expected = [et.QuasiRandomSearcher.from_space(space, trials=4, repeats=2, seed=3).suggest(str(i))
                for i in range(1)]
    # On the tier's shared Ray, left up: shutting it down here made the pytest process
    # start another Ray for the tests after this one.
    grid = tune.Tuner(
        tune.with_resources(objective, {"cpu": 0.5}), param_space={"epochs": 3},
        # reuse_actors: the later points run in the trial actors the first ones started, not
        # in new processes (which points ran is what is checked, not where)
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=len(searcher), metric="score", mode="max",
                                    reuse_actors=True),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="qr", verbose=0),
    ).fit()
    configs = sorted((r.config for r in grid), key=lambda c: (c["repeat"], c["index"]))
    assert [(c["repeat"], c["index"]) for c in configs] == [(r, i) for r in range(2) for i in range(4)]
    assert all(c["epochs"] == 3 for c in configs)
    assert configs[0]["lr"] == expected[0]["lr"] and configs[0]["width"] == expected[0]["width"]
    assert len({c["lr"] for c in configs}) == 8
    assert grid.get_best_result().metrics["score"] == max(r.metrics["score"] for r in grid)
