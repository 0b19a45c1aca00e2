"""Every bad input found before anything starts: `echoray train` names the problem, exits
2 (1 for an unusable MLflow store) and writes nothing: no run folder, no MLflow run (so
none is left RUNNING), no summary. In-process through cli.main, so the table takes
seconds; tests/unit/test_cli_errors.py runs the same contract through a subprocess."""

import json
import os
import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from echoray.cli import main
from echoray.data.fixtures import (
    idx_bytes,
    write_cifar10_bin,
    write_cifar10_py,
    write_idx,
    write_image_folder,
    write_parquet,
)
from echoray.data.sources.cifar10 import RECORD
from helpers import free_port


def _yaml(d):
    (d / "bad.yaml").write_text("echo: [unclosed\n")
    return [str(d / "bad.yaml")], "invalid YAML"


def _missing_parquet(d):
    return ["--set", "source.kind=parquet", "--set", f"source.path={d / 'absent.parquet'}"], \
        f"source.path {d / 'absent.parquet'}: no such file or directory"


def _empty_folder(d):
    (d / "imgs").mkdir()
    return ["--set", "source.kind=image_folder", "--set", f"source.path={d / 'imgs'}"], "no class folders"


def _classes_without_images(d):
    (d / "imgs" / "cat").mkdir(parents=True)
    return ["--set", "source.kind=image_folder", "--set", f"source.path={d / 'imgs'}"], "no image files"


def _empty_parquet(d):
    pq.write_table(pa.table({"image": pa.array([], pa.binary()), "label": pa.array([], pa.int64())}),
                   d / "empty.parquet")
    return ["--set", "source.kind=parquet", "--set", f"source.path={d / 'empty.parquet'}"], \
        "the Parquet data has no rows"


def _empty_cifar(d):
    (d / "cifar").mkdir()
    return ["--set", "source.kind=cifar10", "--set", f"source.path={d / 'cifar'}"], "no data_batch"


def _cifar_label(d):
    root = write_cifar10_bin(d, per_batch=20, batches=5, test=10)
    raw = bytearray((root / "data_batch_3.bin").read_bytes())
    raw[5 * RECORD] = 12  # record 5's label byte
    (root / "data_batch_3.bin").write_bytes(bytes(raw))
    return ["--set", "source.kind=cifar10", "--set", f"source.path={root}"], \
        "data_batch_3.bin: record 5 has label 12, out of range 0..9"


def _parquet_eval_label(d):
    train = write_parquet(d / "train.parquet", n=16, classes=4)
    pq.write_table(pa.table({"image": pq.read_table(train).column("image"), "label": np.full(16, 7)}),
                   d / "eval.parquet")
    return ["--set", "source.kind=parquet", "--set", f"source.path={train}",
            "--set", f"source.eval_path={d / 'eval.parquet'}"], "label 7 out of range 0..3"


def _parquet_text_labels(d):
    train = write_parquet(d / "train.parquet", n=8, classes=2)
    pq.write_table(pa.table({"image": pq.read_table(train).column("image"), "label": ["cat", "dog"] * 4}),
                   d / "text.parquet")
    return ["--set", "source.kind=parquet", "--set", f"source.path={d / 'text.parquet'}"], \
        "column 'label' holds string, expected integer class labels"


def _mixed_sizes(d):
    root = write_image_folder(d / "imgs", n=6, classes=2, size=32)
    write_image_folder(d / "small", n=2, classes=2, size=20)
    for p in (d / "small").rglob("*.png"):
        p.rename(root / p.parent.name / ("small_" + p.name))
    return ["--set", "source.kind=image_folder", "--set", f"source.path={root}", "--set", "source.image_size=null"], \
        "images have different sizes"


def _idx(root):
    return ["--set", "source.kind=idx", "--set", f"source.path={root}"]


def _idx_missing_file(d):
    root = write_idx(d / "idx", train=30, test=10)
    (root / "t10k-labels-idx1-ubyte.gz").unlink()
    return _idx(root), f"source.path {root}: no t10k-labels-idx1-ubyte or t10k-labels-idx1-ubyte.gz"


def _idx_truncated_raw(d):
    root = write_idx(d / "idx", train=30, test=10, gz=False)
    data = (root / "train-images-idx3-ubyte").read_bytes()
    (root / "train-images-idx3-ubyte").write_bytes(data[:-100])
    return _idx(root), (f"{root}/train-images-idx3-ubyte: truncated: the header says 30 records "
                        f"({len(data)} bytes), the file has {len(data) - 100}")


def _idx_truncated_gz(d):
    root = write_idx(d / "idx", train=300, test=10)
    data = (root / "train-images-idx3-ubyte.gz").read_bytes()
    (root / "train-images-idx3-ubyte.gz").write_bytes(data[: len(data) // 2])
    return _idx(root), f"{root}/train-images-idx3-ubyte.gz: truncated or corrupt gzip: the header says 300 records"


def _idx_wrong_magic(d):
    root = write_idx(d / "idx", train=30, test=10, gz=False)
    (root / "t10k-images-idx3-ubyte").write_bytes(idx_bytes(range(10), images=False))  # a labels file
    return _idx(root), f"{root}/t10k-images-idx3-ubyte: magic number 0x00000801, expected 0x00000803"


def _idx_count_mismatch(d):
    root = write_idx(d / "idx", train=30, test=10, gz=False)
    (root / "train-labels-idx1-ubyte").write_bytes(idx_bytes(range(29), images=False))
    return _idx(root), (f"{root}/train-images-idx3-ubyte holds 30 images but {root}/train-labels-idx1-ubyte "
                        "holds 29 labels")


class Payload:
    def __reduce__(self):
        return (os.system, ("touch " + os.environ["ECHORAY_PWNED"],))


def _malicious_pickle(d):
    root = write_cifar10_py(d, per_batch=10, batches=5, test=10)
    (root / "data_batch_2").write_bytes(pickle.dumps({b"data": Payload(), b"labels": [0]}))
    return ["--set", "source.kind=cifar10", "--set", f"source.path={root}"], \
        "data_batch_2: refusing to load posix.system: the file is not plain data"


def _truncated_pickle(d):
    root = write_cifar10_py(d, per_batch=10, batches=5, test=10)
    data = (root / "data_batch_4").read_bytes()
    (root / "data_batch_4").write_bytes(data[: len(data) // 2])
    return ["--set", "source.kind=cifar10", "--set", f"source.path={root}"], \
        "data_batch_4: not a readable CIFAR python batch"


def _workers_not_multiple(d):
    return ["--set", "batch_augmentation.mode=grouped", "--set", "batch_augmentation.copies=3",
            "--set", "scaling.num_workers=4", "--set", "preprocess.augment.on=worker"], \
        "scaling.num_workers must be a multiple of batch_augmentation.copies in grouped mode (got 4 and 3)"


def _retries_without_checkpoints(d):
    return ["--set", "scaling.max_failures=1", "--set", "train.checkpoint_every=0"], "train.checkpoint_every >= 1"


def _fp16_without_gpu(d):
    return ["--set", "train.precision=fp16", "--set", "scaling.use_gpu=false"], \
        "train.precision: fp16 needs a GPU, but scaling.use_gpu is false"


def _unreachable_server(d):
    uri = f"http://127.0.0.1:{free_port()}"
    return ["--set", f"tracking.uri={uri}"], f"MLflow tracking server {uri} is unreachable"


def _sqlite_folder_missing(d):
    uri = f"sqlite:///{d / 'nowhere' / 'mlflow.db'}"
    return ["--set", f"tracking.uri={uri}"], f"MLflow tracking store {uri}: folder {d / 'nowhere'} does not exist"


CASES = {
    "invalid YAML": (_yaml, 2), "missing dataset path": (_missing_parquet, 2),
    "empty image folder": (_empty_folder, 2), "class folders without images": (_classes_without_images, 2),
    "empty Parquet": (_empty_parquet, 2), "empty CIFAR folder": (_empty_cifar, 2),
    "CIFAR label out of range": (_cifar_label, 2), "held-out label out of range": (_parquet_eval_label, 2),
    "text labels": (_parquet_text_labels, 2), "mixed image sizes without a resize": (_mixed_sizes, 2),
    "pickle that would run code": (_malicious_pickle, 2), "truncated CIFAR pickle": (_truncated_pickle, 2),
    "W % M != 0": (_workers_not_multiple, 2), "retries without checkpoints": (_retries_without_checkpoints, 2),
    "fp16 without a GPU": (_fp16_without_gpu, 2),
    "IDX file missing": (_idx_missing_file, 2), "truncated IDX file": (_idx_truncated_raw, 2),
    "truncated IDX gzip": (_idx_truncated_gz, 2), "wrong IDX magic number": (_idx_wrong_magic, 2),
    "IDX images and labels of different counts": (_idx_count_mismatch, 2),
    "unreachable MLflow server": (_unreachable_server, 1), "MLflow store folder missing": (_sqlite_folder_missing, 1),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_named_and_nothing_is_started(case, tmp_path, monkeypatch, capsys):
    build, code = CASES[case]
    data, cwd = tmp_path / "data", tmp_path / "cwd"
    data.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("ECHORAY_PWNED", str(tmp_path / "pwned"))
    args, message = build(data)
    monkeypatch.chdir(cwd)
    assert main(["train", *args]) == code
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") <= 8  # a message, not a traceback
    assert list(cwd.iterdir()) == []  # no runs/, no mlflow.db: no MLflow run, no summary
    assert not (tmp_path / "pwned").exists()  # the pickle's payload never ran


def _s3_missing_bucket():
    return ["--set", "source.kind=image_folder", "--set", "source.path=s3://absent-bucket/imgs"], \
        "source.path s3://absent-bucket/imgs: the bucket 'absent-bucket' does not exist"


def _s3_missing_prefix():
    return ["--set", "source.kind=image_folder", "--set", "source.path=s3://echoray-data/absent"], \
        "source.path s3://echoray-data/absent: no such directory"


def _s3_wrong_credentials():
    os.environ["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
    return ["--set", "source.kind=parquet", "--set", "source.path=s3://echoray-data/parquet"], \
        "source.path s3://echoray-data/parquet: access denied: check the credentials"


def _s3_endpoint_down():
    os.environ["AWS_ENDPOINT_URL"] = endpoint = f"http://127.0.0.1:{free_port()}"
    return ["--set", "source.kind=cifar10", "--set", "source.path=s3://echoray-data/cifar10"], \
        f"source.path s3://echoray-data/cifar10: cannot reach the object store at {endpoint}"


def _storage_missing_bucket():
    return ["--set", "train.storage_path=s3://absent-bucket/runs", "--out", "r"], \
        "train.storage_path s3://absent-bucket/runs/r: the bucket 'absent-bucket' does not exist"


def _storage_wrong_credentials():
    os.environ["AWS_ACCESS_KEY_ID"] = "AKIAUNKNOWNKEY000000"
    return ["--set", "train.storage_path=s3://echoray-data/runs", "--out", "r"], \
        "train.storage_path s3://echoray-data/runs/r: access denied"


S3_CASES = {"missing bucket": _s3_missing_bucket, "missing prefix": _s3_missing_prefix,
            "wrong credentials": _s3_wrong_credentials, "endpoint down": _s3_endpoint_down,
            "checkpoint bucket missing": _storage_missing_bucket,
            "checkpoint credentials denied": _storage_wrong_credentials}


@pytest.mark.parametrize("case", list(S3_CASES))
def test_bad_object_storage_is_named_and_nothing_is_started(case, s3, s3_data, tmp_path, monkeypatch, capsys):
    """Against the tests' S3 server: the URI and what is wrong with it, exit 2, nothing written
    (no run folder, no MLflow store, so no MLflow run left RUNNING), no object in the bucket."""
    for key, value in s3.env.items():
        monkeypatch.setenv(key, value)  # so the case's change is undone afterwards
    before = s3.keys("s3://echoray-data")
    args, message = S3_CASES[case]()
    monkeypatch.chdir(tmp_path)
    assert main(["train", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") <= 8, err
    assert list(tmp_path.iterdir()) == []
    assert s3.keys("s3://echoray-data") == before


def _finished(run):
    (run / "summary.json").write_text("{}")
    return "already finished (summary.json is there); nothing to resume"


def _not_a_run(run):
    (run / "notes.txt").write_text("x")
    return "not a resumable run folder (needs config.yaml and run.json"


@pytest.mark.parametrize("make, extra", [(_finished, []), (_not_a_run, []),
                                          (lambda run: "drop PIPELINE/--out", ["--out", "elsewhere"])])
def test_resume_refuses_what_it_cannot_continue(tmp_path, monkeypatch, capsys, make, extra):
    run = tmp_path / "run"
    run.mkdir()
    message = make(run)
    before = sorted(p.name for p in run.iterdir())
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--resume", str(run), *extra]) == 2
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in run.iterdir()) == before and not (tmp_path / "mlflow.db").exists()
    assert main(["train", "--resume", str(tmp_path / "absent")]) == 2
    assert "no such run folder" in capsys.readouterr().err


def test_resume_names_checkpoint_storage_it_cannot_reach(s3, tmp_path, monkeypatch, capsys):
    """run.json records checkpoints in a bucket that is gone: exit 2 before anything starts."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("name: digits\n")
    (run / "run.json").write_text(json.dumps({
        "mlflow_run_id": "x", "mlflow_tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "pipeline": "p",
        "started_at": 0, "ray_train_storage": "s3://absent-bucket/runs/run", "resumes": []}))
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--resume", str(run)]) == 2
    assert ("--resume " + str(run) + ": train.storage_path s3://absent-bucket/runs/run: the bucket 'absent-bucket' "
            "does not exist") in capsys.readouterr().err
    assert sorted(p.name for p in run.iterdir()) == ["config.yaml", "run.json"]
    assert not (tmp_path / "mlflow.db").exists()
