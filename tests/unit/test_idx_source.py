"""source.kind=idx: the MNIST family's IDX files, raw or gzipped, local or in a bucket.
Index-encoded fixtures (image i carries i in its first pixels, label i % 10), so every
read is checked id for id; the real Fashion-MNIST files when Debian's package is there."""

import gzip
from pathlib import Path

import numpy as np
import pytest

from echoray.config import SourceConfig
from echoray.data.fixtures import decode_id, write_idx
from echoray.data.sources import SourceError, index_source, open_reader

FASHION = Path("/usr/share/datasets/fashion-mnist")


def _source(path, **kw) -> SourceConfig:
    return SourceConfig(kind="idx", path=str(path), image_size=kw.pop("image_size", None), **kw)


@pytest.mark.parametrize("gz", [True, False])
def test_reads_exact_ids_labels_and_splits_in_requested_order(tmp_path, gz):
    root = write_idx(tmp_path, train=120, test=40, gz=gz)
    idx = index_source(_source(root))
    assert (len(idx.train_ids), len(idx.eval_ids), idx.num_classes, idx.channels, idx.image_size) == (
        120, 40, 10, 1, 28)
    ids = np.array([119, 3, 4, 5, 60, 3, 0])  # runs, a gap, a duplicate, out of order
    reader = open_reader(idx)
    images, labels = reader.read(ids, "train")
    assert images.shape == (7, 28, 28, 1) and images.dtype == np.uint8 and labels.dtype == np.int64
    assert [decode_id(im) for im in images] == ids.tolist()
    assert labels.tolist() == (ids % 10).tolist()
    ev, el = reader.read(np.array([39, 0, 17]), "eval")
    assert [decode_id(im) for im in ev] == [39, 0, 17] and el.tolist() == [9, 0, 7]
    empty, none = reader.read(np.array([], dtype=np.int64), "train")
    assert empty.shape == (0, 28, 28, 1) and none.shape == (0,)


def test_raw_and_gzipped_files_give_the_same_arrays(tmp_path):
    a = index_source(_source(write_idx(tmp_path / "gz", gz=True)))
    b = index_source(_source(write_idx(tmp_path / "raw", gz=False)))
    ids = np.arange(0, 120, 7)
    for split, chosen in (("train", ids), ("eval", np.arange(40))):
        xa, ya = open_reader(a).read(chosen, split)
        xb, yb = open_reader(b).read(chosen, split)
        assert np.array_equal(xa, xb) and np.array_equal(ya, yb)


def test_limits_and_resize(tmp_path):
    idx = index_source(_source(write_idx(tmp_path), limit=50, eval_limit=8, image_size=32))
    assert idx.train_ids.tolist() == list(range(50)) and idx.eval_ids.tolist() == list(range(8))
    images, labels = open_reader(idx).read(np.array([49, 2]), "train")
    assert images.shape == (2, 32, 32, 1) and labels.tolist() == [9, 2]


def test_the_raw_file_wins_over_the_gzip_and_files_can_mix(tmp_path):
    root = write_idx(tmp_path, train=30, test=10, gz=True)
    raw = write_idx(tmp_path / "raw", train=30, test=10, gz=False)
    (raw / "train-images-idx3-ubyte").rename(root / "train-images-idx3-ubyte")
    idx = index_source(_source(root))
    assert idx.details["train"]["gz"] is False and idx.details["eval"]["gz"] is True
    images, labels = open_reader(idx).read(np.array([29, 1]), "train")
    assert [decode_id(im) for im in images] == [29, 1] and labels.tolist() == [9, 1]


def test_sample_id_out_of_range_is_named(tmp_path):
    idx = index_source(_source(write_idx(tmp_path, gz=False)))
    with pytest.raises(SourceError, match=r"t10k-images-idx3-ubyte: sample id out of range 0\.\.39"):
        open_reader(idx).read(np.array([40]), "eval")


def test_objects_in_a_bucket_read_as_files_on_disk(s3, tmp_path):
    bucket = s3.make_bucket("echoray-idx")
    for gz in (True, False):
        local = write_idx(tmp_path / str(gz), train=64, test=16, gz=gz)
        uri = s3.upload(local, f"{bucket}/{'gz' if gz else 'raw'}")
        a, b = index_source(_source(local)), index_source(_source(uri))
        ids = np.array([63, 0, 1, 2, 40])
        xa, ya = open_reader(a).read(ids, "train")
        xb, yb = open_reader(b).read(ids, "train")
        assert [decode_id(im) for im in xb] == ids.tolist()
        assert np.array_equal(xa, xb) and np.array_equal(ya, yb)


@pytest.mark.skipif(not FASHION.is_dir(), reason="Debian's dataset-fashion-mnist is not installed")
def test_real_fashion_mnist_from_the_debian_package():
    idx = index_source(_source(FASHION))
    assert (len(idx.train_ids), len(idx.eval_ids), idx.num_classes, idx.image_size) == (60000, 10000, 10, 28)
    with gzip.open(FASHION / "t10k-images-idx3-ubyte.gz") as f:
        want = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(FASHION / "t10k-labels-idx1-ubyte.gz") as f:
        want_labels = np.frombuffer(f.read(), np.uint8, offset=8)
    ids = np.array([9999, 0, 5000, 1])
    images, labels = open_reader(idx).read(ids, "eval")
    assert np.array_equal(images[..., 0], want[ids]) and np.array_equal(labels, want_labels[ids])
    _, train_labels = open_reader(idx).read(idx.train_ids, "train")
    assert np.bincount(train_labels).tolist() == [6000] * 10  # Fashion-MNIST is balanced


def test_a_gzip_of_several_members_is_not_mistaken_for_a_truncated_one(tmp_path):
    """Its trailer holds the last member's length only; the index then counts the whole."""
    root = write_idx(tmp_path, train=50, test=10, gz=False)
    data = (root / "train-images-idx3-ubyte").read_bytes()
    half = len(data) // 2
    (root / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(data[:half]) + gzip.compress(data[half:]))
    (root / "train-images-idx3-ubyte").unlink()
    idx = index_source(_source(root))
    images, _ = open_reader(idx).read(np.array([49, 0, 25]), "train")
    assert [decode_id(im) for im in images] == [49, 0, 25]
    (root / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(data[:half]) + gzip.compress(data[half:])[:-9])
    with pytest.raises(SourceError, match=r"train-images-idx3-ubyte\.gz: truncated or corrupt gzip"):
        index_source(_source(root))
