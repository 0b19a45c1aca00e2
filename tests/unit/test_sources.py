import os
import pickle

import numpy as np
import pytest

from echoray.config import SourceConfig
from echoray.data.fixtures import (
    decode_id,
    write_cifar10_bin,
    write_cifar10_py,
    write_image_folder,
    write_parquet,
)
from echoray.data.sources import SourceError, index_source, open_reader
from echoray.data.sources.safe_unpickle import UnsafePickleError, load_plain


def test_digits_reader_matches_scikit_learn():
    from sklearn.datasets import load_digits

    idx = index_source(SourceConfig(kind="digits", image_size=None))
    assert len(idx.train_ids) + len(idx.eval_ids) == 1797 and idx.image_size == 8
    images, labels = open_reader(idx).read(np.arange(1797), "train")
    d = load_digits()
    assert np.array_equal(labels, d.target)
    assert np.array_equal(images[..., 0], np.round(d.images * 255 / 16).astype(np.uint8))


def test_digits_upscale_and_limit():
    idx = index_source(SourceConfig(kind="digits", image_size=16, limit=100))
    assert len(idx.train_ids) == 100
    images, _ = open_reader(idx).read(idx.train_ids[:5], "train")
    assert images.shape == (5, 16, 16, 1)


def test_cifar10_binary_reads_exact_records_in_requested_order(tmp_path):
    root = write_cifar10_bin(tmp_path, per_batch=30, batches=5, test=20)
    idx = index_source(SourceConfig(kind="cifar10", path=str(root), image_size=32))
    assert len(idx.train_ids) == 150 and len(idx.eval_ids) == 20
    ids = np.array([149, 3, 4, 5, 29, 30, 31, 77, 3])  # spans files, runs, a duplicate
    images, labels = open_reader(idx).read(ids, "train")
    assert [decode_id(im) for im in images] == ids.tolist()
    assert labels.tolist() == (ids % 10).tolist()
    ev, el = open_reader(idx).read(np.array([0, 19]), "eval")
    assert [decode_id(im) for im in ev] == [0, 19]


def test_cifar10_python_batches_load_through_the_plain_data_unpickler(tmp_path):
    root = write_cifar10_py(tmp_path, per_batch=10, batches=5, test=10)
    idx = index_source(SourceConfig(kind="cifar10", path=str(root), image_size=32))
    images, labels = open_reader(idx).read(np.array([0, 49, 12]), "train")
    assert [decode_id(im) for im in images] == [0, 49, 12]
    assert labels.tolist() == [0, 9, 2]


class Payload:
    def __reduce__(self):
        return (os.system, ("touch " + os.environ["ECHORAY_PWNED"],))


def test_malicious_pickle_is_refused_and_its_payload_never_runs(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    monkeypatch.setenv("ECHORAY_PWNED", str(marker))
    data = pickle.dumps({b"data": Payload(), b"labels": [0]})
    with pytest.raises(UnsafePickleError, match="posix.system|os.system"):
        load_plain(data, "evil")
    root = tmp_path / "cifar-10-batches-py"
    root.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        (root / name).write_bytes(data)
    with pytest.raises(UnsafePickleError, match="data_batch_1"):
        index_source(SourceConfig(kind="cifar10", path=str(root)))
    assert not marker.exists()


def test_image_folder_classes_labels_and_pixels(tmp_path):
    root = write_image_folder(tmp_path / "imgs", n=30, classes=3, size=32)
    idx = index_source(SourceConfig(kind="image_folder", path=str(root), image_size=None))
    assert idx.num_classes == 3 and len(idx.train_ids) + len(idx.eval_ids) == 30
    files = idx.details["train"].paths()
    images, got = open_reader(idx).read(idx.train_ids, "train")
    for sid, img, lab in zip(idx.train_ids, images, got, strict=True):
        i = int(os.path.basename(files[sid])[4:9])
        assert decode_id(img) == i and lab == i % 3


def test_image_folder_resizes_mixed_sizes_only_when_asked(tmp_path):
    root = write_image_folder(tmp_path / "a", n=6, classes=2, size=32)
    write_image_folder(tmp_path / "b", n=2, classes=2, size=20)
    for p in (tmp_path / "b").rglob("*.png"):
        p.rename(root / p.parent.name / ("small_" + p.name))
    # Caught when indexing (image headers only), before anything starts.
    with pytest.raises(SourceError, match=r"different sizes \(.*is 32x32, .*small_img_\d+.png is 20x20\).*source.image_size"):
        index_source(SourceConfig(kind="image_folder", path=str(root), image_size=None, holdout_fraction=0.1))
    idx = index_source(SourceConfig(kind="image_folder", path=str(root), image_size=16))
    images, _ = open_reader(idx).read(idx.train_ids, "train")
    assert images.shape[1:] == (16, 16, 3)


def test_parquet_reads_rows_across_row_groups(tmp_path):
    path = write_parquet(tmp_path / "d.parquet", n=50, classes=5, row_group=8)
    idx = index_source(SourceConfig(kind="parquet", path=str(path), image_size=None))
    assert idx.num_classes == 5
    ids = np.array([49, 0, 8, 7, 23])
    images, labels = open_reader(idx).read(ids, "train")
    assert [decode_id(im) for im in images] == ids.tolist() and labels.tolist() == (ids % 5).tolist()


def test_undecodable_image_is_named(tmp_path):
    root = write_image_folder(tmp_path / "imgs", n=4, classes=2)
    broken = root / "class_0" / "img_00000.png"
    broken.write_bytes(b"not a png")
    idx = index_source(SourceConfig(kind="image_folder", path=str(root), image_size=None, holdout_fraction=0.25))
    files = idx.details["train"].paths()
    with pytest.raises(SourceError, match="img_00000.png"):
        open_reader(idx).read(np.arange(len(files)), "train")


@pytest.mark.parametrize("kind", ["cifar10", "image_folder", "parquet"])
def test_missing_paths_are_named(tmp_path, kind):
    missing = str(tmp_path / "absent")
    with pytest.raises(SourceError, match="absent"):
        index_source(SourceConfig(kind=kind, path=missing))


def test_empty_folders_are_rejected(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no class folders"):
        index_source(SourceConfig(kind="image_folder", path=str(tmp_path / "empty")))
    with pytest.raises(SourceError, match="no data_batch"):
        index_source(SourceConfig(kind="cifar10", path=str(tmp_path / "empty")))


def test_parquet_images_of_mixed_sizes_fail_naming_rows_and_sizes(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from echoray.data.fixtures import encoded_image, png_bytes

    images = [png_bytes(encoded_image(i, 32 if i < 8 else 24)) for i in range(16)]
    pq.write_table(pa.table({"image": images, "label": np.arange(16) % 2}), tmp_path / "d.parquet")
    idx = index_source(SourceConfig(kind="parquet", path=str(tmp_path / "d.parquet"), image_size=None))
    with pytest.raises(SourceError, match=r"d.parquet\[row \d+\] is 32x32, .*d.parquet\[row \d+\] is 24x24\); "
                                          r"set source.image_size"):
        open_reader(idx).read(np.arange(16), "train")


@pytest.mark.parametrize("kind", ["image_folder", "parquet"])
def test_undecodable_truncated_and_missing_images_are_skipped_when_asked(tmp_path, kind):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from echoray.data.fixtures import encoded_image, png_bytes
    from echoray.data.sources.base import read_skipping

    good = [png_bytes(encoded_image(i)) for i in range(6)]
    broken = {1: b"not an image", 4: good[4][: len(good[4]) // 3]}  # garbage, truncated
    if kind == "image_folder":
        root = write_image_folder(tmp_path / "imgs", n=6, classes=1)
        files = sorted((root / "class_0").glob("*.png"))
        for i, data in broken.items():
            files[i].write_bytes(data)
        path = root
    else:
        cells = [broken.get(i, g) for i, g in enumerate(good)]
        cells[5] = None  # a missing cell
        broken[5] = None
        path = tmp_path / "d.parquet"
        pq.write_table(pa.table({"image": pa.array(cells, pa.binary()), "label": np.zeros(6, np.int64)}), path)
    idx = index_source(SourceConfig(kind=kind, path=str(path), image_size=None, holdout_fraction=0.2))
    ids = np.arange(6)
    reader = open_reader(idx)
    got = read_skipping(reader, ids, "train")
    assert got.kept.tolist() == [i not in broken for i in range(6)]
    assert [decode_id(im) for im in got.images] == [i for i in range(6) if i not in broken]
    assert [sid for sid, _, _ in got.bad] == sorted(broken)
    assert "truncated" in dict((sid, reason) for sid, _, reason in got.bad)[4]
    with pytest.raises(SourceError, match="cannot decode image .*(img_00001.png|row 1)"):
        reader.read(ids, "train")
