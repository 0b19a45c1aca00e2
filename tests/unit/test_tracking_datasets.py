"""The dataset inputs a run logs: a digest from the index that follows the data, and the
two inputs (training, evaluation) with source, profile and schema in an MLflow store."""

import json
import os

import numpy as np
from mlflow.tracking import MlflowClient

from echoray.config import SourceConfig
from echoray.data.fixtures import write_cifar10_bin, write_image_folder, write_parquet
from echoray.data.sources import index_source
from echoray.tracking_datasets import log_datasets, lost_insert_race, split_digest


def _digests(cfg: SourceConfig) -> tuple[str, str]:
    idx = index_source(cfg)
    return split_digest(idx, "train"), split_digest(idx, "eval")


def test_image_folder_digest_follows_names_and_sizes(tmp_path):
    root = write_image_folder(tmp_path / "imgs", n=30, classes=3)
    cfg = SourceConfig(kind="image_folder", path=str(root), image_size=32)
    first = _digests(cfg)
    assert _digests(cfg) == first  # the same files: the same digest
    assert first[0] != first[1]  # the two splits are other samples
    victim = sorted(root.rglob("*.png"))[0]
    stat = victim.stat()
    victim.write_bytes(victim.read_bytes() + b"\0")  # one file one byte longer, same mtime
    os.utime(victim, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    grown = _digests(cfg)
    assert grown[0] != first[0] and grown[1] != first[1]  # a hold-out split lists the whole folder
    victim.rename(victim.with_name("renamed_" + victim.name))
    assert _digests(cfg)[0] not in (first[0], grown[0])


def test_cifar_digest_follows_a_rewritten_file_and_the_limit(tmp_path):
    root = write_cifar10_bin(tmp_path, per_batch=20, batches=5, test=20)
    cfg = SourceConfig(kind="cifar10", path=str(root), image_size=32)
    train, evals = _digests(cfg)
    assert _digests(SourceConfig(kind="cifar10", path=str(root), image_size=32, limit=50))[0] != train
    test_batch = root / "test_batch.bin"
    data = bytearray(test_batch.read_bytes())
    data[5] ^= 0xFF
    test_batch.write_bytes(bytes(data))  # same size, a new mtime
    os.utime(test_batch, ns=(0, test_batch.stat().st_mtime_ns + 1_000_000_000))
    assert _digests(cfg) == (train, _digests(cfg)[1]) and _digests(cfg)[1] != evals


def test_run_gets_training_and_evaluation_inputs(tmp_path, sqlite_uri):
    path = write_parquet(tmp_path / "data.parquet", n=80, classes=4, row_group=16)
    idx = index_source(SourceConfig(kind="parquet", path=str(path), image_size=32))
    client = MlflowClient(sqlite_uri)
    exp = client.create_experiment("datasets")
    run_id = client.create_run(exp).info.run_id
    log_datasets(client, run_id, idx)
    log_datasets(client, run_id, idx)  # a resumed run on the same data adds nothing
    inputs = client.get_run(run_id).inputs.dataset_inputs
    assert len(inputs) == 2
    by_context = {i.tags[0].value: i.dataset for i in inputs}
    assert set(by_context) == {"training", "evaluation"}
    train, held = by_context["training"], by_context["evaluation"]
    assert train.name == "data.parquet" and train.source_type == "local"
    assert json.loads(train.source)["uri"] == str(path)
    assert json.loads(train.profile)["num_rows"] == len(idx.train_ids)
    assert json.loads(held.profile)["num_rows"] == len(idx.eval_ids)
    assert len(idx.train_ids) + len(idx.eval_ids) == 80
    spec = json.loads(train.schema)["mlflow_colspec"]
    assert [(s["name"], s["tensor-spec"]["dtype"], s["tensor-spec"]["shape"]) for s in spec] == [
        ("image", "uint8", [-1, 32, 32, 3]), ("label", "int64", [-1])]
    assert train.digest == split_digest(idx, "train") != held.digest


def test_in_memory_source_digest_follows_its_arrays():
    idx = index_source(SourceConfig(kind="digits", image_size=None))
    before = split_digest(idx, "train")
    assert split_digest(idx, "train") == before
    idx.details["images"] = np.array(idx.details["images"])
    idx.details["images"][0, 0, 0, 0] ^= 1  # row 0 is among the sampled rows
    assert split_digest(idx, "train") != before


def test_many_files_are_listed_once_and_only_theirs_count(tmp_path):
    from echoray.tracking_datasets import file_stats

    for i in range(20):
        (tmp_path / f"part{i:02d}.parquet").write_bytes(b"x" * i)
    (tmp_path / "notes.txt").write_text("not a split's file")
    named = [str(tmp_path / f"part{i:02d}.parquet") for i in range(20)]
    listed = file_stats(str(tmp_path), named)
    assert [(p, size) for p, size, _ in listed] == [(p, i) for i, p in enumerate(named)]
    assert file_stats(str(tmp_path), named[:3]) == listed[:3]  # a few: one stat each, the same rows


def test_a_dataset_row_inserted_by_another_run_first_is_told_from_other_errors():
    """The store's answers when two runs insert one dataset at once: the message `mlflow
    server` with SQLite gave a trial of a search (tests/e2e/test_tune_job.py, before the
    parent run logged the data first), and PostgreSQL's and MySQL's for the same key."""
    from mlflow.exceptions import MlflowException, RestException

    sqlite = RestException({"error_code": "BAD_REQUEST", "message": (
        "(sqlite3.IntegrityError) UNIQUE constraint failed: datasets.experiment_id, datasets.name, "
        "datasets.digest [SQL: INSERT INTO datasets (dataset_uuid, experiment_id, name, digest, ...)]")})
    postgres = MlflowException('(psycopg2.errors.UniqueViolation) duplicate key value violates unique '
                               'constraint "dataset_pk"')
    mysql = MlflowException("(pymysql.err.IntegrityError) (1062, \"Duplicate entry '1-digits-ad7a' "
                            "for key 'datasets.PRIMARY'\")")
    assert all(lost_insert_race(e) for e in (sqlite, postgres, mysql))
    other = RestException({"error_code": "BAD_REQUEST", "message": "Run 'abc' not found"})
    assert not lost_insert_race(other)
    assert not lost_insert_race(MlflowException("UNIQUE constraint failed: runs.run_uuid"))
