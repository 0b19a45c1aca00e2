"""Storage locations: the pure rules (checkpoint folder per run, shared storage on a
cluster) and every source kind read from a real S3 server exactly as from local disk."""

from pathlib import Path

import numpy as np
import pytest

from echoray.config_load import load_config
from echoray.data.sources import index_source, open_reader
from echoray.storage.fs import (
    StorageError,
    checkpoint_location,
    network_mount,
    open_location,
    unshared_storage,
    upload_folder,
)

MOUNTS = [("/", "ext4"), ("/mnt", "ext4"), ("/mnt/nfs", "nfs4"), ("/mnt/nfs/local", "xfs"),
          ("/data/s3", "fuse.mountpoint-s3")]


def test_checkpoints_go_to_a_folder_per_run_inside_the_storage_path(tmp_path):
    run = tmp_path / "runs" / "digits-20260101-120000-000000"
    assert checkpoint_location(None, run) == str(run / "ray")  # the default: the run folder
    assert checkpoint_location("s3://b/runs/", run) == "s3://b/runs/digits-20260101-120000-000000"
    assert checkpoint_location("/mnt/nfs/ckpt", run) == "/mnt/nfs/ckpt/digits-20260101-120000-000000"
    assert checkpoint_location("file:///mnt/x", run) == "/mnt/x/digits-20260101-120000-000000"


@pytest.mark.parametrize("path, fstype", [
    ("/mnt/nfs/echoray", "nfs4"), ("/mnt/nfs", "nfs4"), ("/mnt/nfs/local/x", None),  # the deepest mount wins
    ("/mnt/nfsx", None), ("/home/u/runs", None), ("/data/s3/runs", "fuse.mountpoint-s3")])
def test_network_mounts_are_recognised_by_the_mount_holding_the_path(path, fstype):
    assert network_mount(path, MOUNTS) == fstype


def test_a_local_folder_is_refused_only_where_other_nodes_would_need_it():
    def refused(location, nodes=1, can_add=False, shared=False):
        return unshared_storage(location, nodes=nodes, can_add_nodes=can_add, declared_shared=shared,
                                partitions=MOUNTS)

    assert refused("/home/u/runs/r/ray") is None  # one node, no autoscaler: the run folder serves
    msg = refused("/home/u/runs/r/ray", nodes=3)
    assert msg.startswith("train.storage_path /home/u/runs/r/ray: a local folder, but this cluster has 3 nodes")
    assert "an autoscaler that can add nodes" in refused("/home/u/runs/r/ray", can_add=True)
    for ok in ("s3://bucket/runs/r", "gs://bucket/runs/r", "/mnt/nfs/runs/r"):
        assert refused(ok, nodes=3, can_add=True) is None
    assert refused("/home/u/runs/r/ray", nodes=3, shared=True) is None  # the user's word


@pytest.mark.parametrize("kind", ["cifar10", "image_folder", "parquet", "idx"])
def test_each_source_reads_the_same_examples_from_s3_as_from_disk(s3_data, kind):
    local, uri = s3_data[kind]
    sets = [f"source.kind={kind}", "source.image_size=32"]
    a = index_source(load_config(None, [*sets, f"source.path={local}"]).source)
    b = index_source(load_config(None, [*sets, f"source.path={uri}"]).source)
    assert np.array_equal(a.train_ids, b.train_ids) and np.array_equal(a.eval_ids, b.eval_ids)
    ids = b.train_ids[::7]
    for split, chosen in (("train", ids), ("eval", b.eval_ids)):
        xa, ya = open_reader(a).read(chosen, split)
        xb, yb = open_reader(b).read(chosen, split)
        assert np.array_equal(xa, xb) and np.array_equal(ya, yb) and len(yb) == len(chosen)


def test_object_store_errors_name_the_uri(s3, monkeypatch):
    with pytest.raises(StorageError, match=r"^k s3://no-such-bucket/x: the bucket 'no-such-bucket' does not exist"):
        open_location("s3://no-such-bucket/x", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    with pytest.raises(StorageError, match=r"^k s3://echoray-data/x: access denied: check the credentials"):
        open_location("s3://echoray-data/x", "k")


def test_local_paths_open_without_a_check(tmp_path):
    fs, path = open_location(str(tmp_path / "absent"), "k")
    assert path == str(Path(tmp_path / "absent")) and fs.type_name == "local"


def test_upload_folder_copies_every_file_and_raises_when_a_close_fails(s3, tmp_path):
    """Nested files land whole in the bucket; an upload that fails at close raises (pyarrow's
    copy_files logged such a failure and returned as if the copy had succeeded)."""
    src = tmp_path / "ckpt"
    (src / "sub").mkdir(parents=True)
    (src / "model.pt").write_bytes(b"m" * 70_000)
    (src / "sub" / "rank_0.json").write_text("{}")
    bucket = s3.make_bucket("echoray-upload-folder")
    fs, path = open_location(f"{bucket}/runs", "train.storage_path")
    upload_folder(fs, src, f"{path}/checkpoint_000001")
    assert sorted(s3.keys(f"{bucket}/runs")) == ["checkpoint_000001/model.pt", "checkpoint_000001/sub/rank_0.json"]
    local, _ = open_location(str(tmp_path / "shared"), "train.storage_path")  # a mount: folders made too
    upload_folder(local, src, str(tmp_path / "shared" / "trials" / "r0-t0"))
    assert sorted(str(p.relative_to(tmp_path / "shared")) for p in (tmp_path / "shared").rglob("*") if p.is_file()) \
        == ["trials/r0-t0/model.pt", "trials/r0-t0/sub/rank_0.json"]

    class FailsAtClose:  # a store that stops answering as each upload ends
        def create_dir(self, path, recursive=True):
            pass

        def open_output_stream(self, path):
            class Stream:
                def __enter__(self):
                    return self

                def write(self, data):
                    return len(data)

                def __exit__(self, *exc):
                    raise OSError("AWS Error NETWORK_CONNECTION during UploadPart operation: curlCode: 28")
            return Stream()

    with pytest.raises(OSError, match="UploadPart"):
        upload_folder(FailsAtClose(), src, "bucket/dest")
