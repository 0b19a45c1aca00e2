"""`echoray report` on a study folder: relative numbers exact, PNGs written and logged to the
study's MLflow run (a real sqlite store), missing variants named."""

import json

import pytest
from mlflow.tracking import MlflowClient

from echoray.config_load import ConfigError, load_config
from echoray.tune.report import write_report

PNG = b"\x89PNG\r\n\x1a\n"


def spread(values):
    return {"mean": sum(values) / len(values), "min": min(values), "max": max(values), "n": len(values)}


def make_study(tmp_path, sqlite_uri, variants: dict[str, list[float] | None]):
    client = MlflowClient(sqlite_uri)
    exp = client.create_experiment("report-test")
    run_id = client.create_run(exp, run_name="study").info.run_id
    cfg = load_config(None, ["tracking.experiment=report-test"]).model_dump(mode="json")
    (tmp_path / "study.json").write_text(json.dumps({
        "pipeline": "p.yaml", "config": cfg, "variants": list(variants), "trials": 4, "repeats": 3,
        "study_run_id": run_id, "tracking_uri": sqlite_uri}))
    for name, fresh in variants.items():
        if fresh is None:
            continue
        d = tmp_path / name.replace(":", "-")
        d.mkdir()
        (d / "summary.json").write_text(json.dumps({
            "fresh_examples_to_target": spread(fresh), "best_accuracy": spread([0.9, 0.92, 0.94]),
            "repeats_without_a_best": [], "mlflow_parent_run_id": f"parent-{name}"}))
    return client, run_id


def test_report_gives_fresh_examples_relative_to_baseline_and_logs_plots(tmp_path, sqlite_uri):
    client, run_id = make_study(tmp_path, sqlite_uri, {
        "baseline": [900.0, 1000.0, 1100.0], "after_augment:2": [500.0, 600.0, 700.0],
        "batch:2": [800.0, 1000.0, 1200.0], "ba:4": [700.0, 700.0, 700.0]})
    report = write_report(tmp_path)
    rel = {r["variant"]: r["relative"] for r in report["variants"]}
    assert rel["baseline"] == {"mean": 1.0, "min": 0.9, "max": 1.1, "n": 3}
    assert rel["after_augment:2"] == pytest.approx({"mean": 0.6, "min": 0.5, "max": 0.7, "n": 3})
    assert rel["batch:2"] == pytest.approx({"mean": 1.0, "min": 0.8, "max": 1.2, "n": 3})
    for name in ("figure3_fresh_examples.png", "batch_augmentation_accuracy.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG
    logged = {a.path for a in client.list_artifacts(run_id)}
    assert logged == {"figure3_fresh_examples.png", "batch_augmentation_accuracy.png", "report.json"}
    assert json.loads((tmp_path / "report.json").read_text())["baseline_mean_fresh_examples"] == 1000.0


def test_report_names_the_variant_that_has_not_finished(tmp_path, sqlite_uri):
    make_study(tmp_path, sqlite_uri, {"baseline": [1000.0], "before_augment:2": None})
    with pytest.raises(ConfigError, match="variant before_augment:2 has no finished search") as err:
        write_report(tmp_path)
    assert "echoray study --resume" in str(err.value)
    assert not (tmp_path / "report.json").exists()


def test_report_refuses_a_folder_that_is_not_a_study(tmp_path):
    with pytest.raises(ConfigError, match="no study.json"):
        write_report(tmp_path)
