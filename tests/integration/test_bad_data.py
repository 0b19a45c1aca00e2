"""Bad data only found by reading it, on a local Ray: undecodable or truncated images are
skipped and counted up to source.max_bad_fraction (the run's counts stay exact), beyond
it the run stops at once (no retry would help) naming the files. A stopped run exits 1,
its MLflow run is FAILED, no summary. (Any SourceError a reader raises mid-run takes the
same path, e.g. Parquet images of mixed sizes: tests/unit/test_sources.py.)"""

import json

import pyarrow.parquet as pq
from mlflow.tracking import MlflowClient

from echoray.cli import main
from echoray.config import SourceConfig
from echoray.data.fixtures import write_image_folder
from echoray.data.sources import index_source


def corrupt_training_images(root, n_bad):
    """Break n_bad files of the training split: garbage bytes, then truncated PNGs."""
    idx = index_source(SourceConfig(kind="image_folder", path=str(root), image_size=16))
    files = idx.details["train"].paths()
    bad = [files[i] for i in idx.train_ids[:n_bad]]
    for k, path in enumerate(bad):
        data = open(path, "rb").read()
        open(path, "wb").write(b"not an image" if k % 2 == 0 else data[: len(data) // 3])
    return idx, bad


def only_run(db):
    client = MlflowClient(db)
    runs = client.search_runs([client.get_experiment_by_name("echoray").experiment_id])
    assert len(runs) == 1
    return client, runs[0]


def train_args(db, *extra):
    return ["train", "--set", f"tracking.uri={db}", "--set", "train.batch_size=32", "--set", "train.target=null",
            "--set", "source.image_size=16", "--set", "preprocess.augment.ops=[]", "--out", "run", *extra]


def test_a_few_undecodable_images_are_skipped_and_counted(local_ray, tmp_path, sqlite_uri, monkeypatch,
                                                          capsys):
    root = write_image_folder(tmp_path / "imgs", n=200, classes=4, size=20)
    idx, bad = corrupt_training_images(root, 2)
    db = sqlite_uri
    monkeypatch.chdir(tmp_path)
    assert main(train_args(db, "--set", "source.kind=image_folder", "--set", f"source.path={root}",
                           "--set", "source.max_bad_fraction=0.05", "--set", "train.max_epochs=3",
                           # in this process, as `echoray train` on a local Ray it started (the
                           # reads, and so the skips, are the Ray Data actors' either way)
                           "--set", "audit.enabled=true", "--set", "scaling.local_mode=true")) == 0
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["faults"]["skipped_bad_examples"] == 2 and sorted(s["faults"]["skipped_bad_files"]) == sorted(bad)
    good = len(idx.train_ids) - 2  # 158 readable examples per epoch; batches of 32, the stream read to its end
    assert s["fresh_examples"] == (3 * good // 32) * 32
    audit = pq.read_table(tmp_path / "run" / "audit.parquet").to_pydict()
    bad_ids = set(idx.train_ids[:2].tolist())
    assert not bad_ids & set(audit["sample_id"])
    pairs = list(zip(audit["epoch"], audit["sample_id"], strict=True))
    assert len(pairs) == len(set(pairs)) == s["fresh_examples"]
    assert only_run(db)[1].info.status == "FINISHED"


def _too_many_bad_images(tmp_path):
    """(overrides, texts the error line holds, {bad path: the reason it must be named with}).
    Which bad files the line names is the first ones the actors reported, which depends on
    the read plan's order and the actors' timing: each named one must carry its own reason."""
    root = write_image_folder(tmp_path / "imgs", n=200, classes=4, size=20)
    _, bad = corrupt_training_images(root, 4)
    reasons = {path: "not a readable image" if k % 2 == 0 else "image file is truncated"
               for k, path in enumerate(bad)}  # corrupt_training_images: garbage, then truncated
    return ["--set", "source.kind=image_folder", "--set", f"source.path={root}",
            "--set", "source.max_bad_fraction=0.01"], [
        "bad input data:", "undecodable training image(s), more than source.max_bad_fraction=0.01 of 160 allows (1)"], \
        reasons


def test_too_many_bad_images_stop_the_run_at_once(local_ray, tmp_path, sqlite_uri, monkeypatch, capsys):
    extra, messages, named = _too_many_bad_images(tmp_path)
    db = sqlite_uri
    monkeypatch.chdir(tmp_path)
    # max_failures=2: the error is not retried, it would fail the same way
    assert main(train_args(db, "--set", "train.max_epochs=2", "--set", "scaling.max_failures=2", *extra)) == 1
    captured = capsys.readouterr()
    (line,) = [x for x in captured.err.splitlines() if x.startswith("echoray: ")]  # (Ray's own logs aside)
    for text in messages:
        assert text in line
    shown = [path for path in named if f"{path} (" in line]
    assert len(shown) >= 2  # more than the one allowed, each with its reason
    assert all(f"{path} ({named[path]}" in line for path in shown)
    assert "a worker failed" not in captured.out  # stopped, not retried
    assert not (tmp_path / "run" / "summary.json").exists()
    assert only_run(db)[1].info.status == "FAILED"
