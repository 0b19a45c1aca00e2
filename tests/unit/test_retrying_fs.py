"""The retrying filesystem (echoray/storage/retrying_fs.py) Ray Train and Tune write through: the
same files as the wrapped filesystem, each call retried under the store retry time (half of train.stall_timeout_s), and an
upload whole or not at all. The outage case freezes the tests' S3 server (SIGSTOP) in
the middle of a write, as tests/integration/test_store_outage.py does for whole runs."""

import json
import logging
import os
import signal
import socket
import threading
import time

import cloudpickle
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from echoray.storage.fs import REQUEST_TIMEOUT_S, bounded, open_location
from echoray.storage.retry import StoreUnavailable
from echoray.storage.retrying_fs import RetryingHandler, retrying


def local_retrying(retry_s=5.0):
    return pafs.PyFileSystem(RetryingHandler(pafs.LocalFileSystem(), retry_s, "train.storage_path s3://b/run"))


def tree(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_checkpoint_copied_through_it_is_the_same_files_and_the_filesystem_pickles(tmp_path):
    src = tmp_path / "ckpt"
    (src / "sub").mkdir(parents=True)
    (src / "model.pt").write_bytes(os.urandom(9 << 20))  # past the in-memory spool: through /tmp
    (src / "sub" / "meta.json").write_text('{"epoch": 3}')
    fs = cloudpickle.loads(cloudpickle.dumps(local_retrying()))  # as Ray hands it to a worker
    assert fs.type_name == "py::retrying+local"
    pafs.copy_files(str(src), str(tmp_path / "dest"), destination_filesystem=fs)
    assert tree(tmp_path / "dest") == tree(src)
    assert fs.open_input_file(str(tmp_path / "dest" / "model.pt")).read() == (src / "model.pt").read_bytes()
    infos = fs.get_file_info(pafs.FileSelector(str(tmp_path / "dest"), recursive=True))
    assert sorted(i.size for i in infos if i.type == pafs.FileType.File) == [12, 9 << 20]
    fs.delete_dir(str(tmp_path / "dest" / "sub"))
    assert sorted(tree(tmp_path / "dest")) == ["model.pt"]


def test_local_storage_and_retry_s_0_are_left_as_they_are():
    local = pafs.LocalFileSystem()
    assert retrying(local, 120, "x") is local
    s3ish = pafs.PyFileSystem(RetryingHandler(local, 1, "x"))
    assert retrying(s3ish, 0, "x") is s3ish


def test_a_missing_object_is_not_retried(tmp_path):
    fs = local_retrying(retry_s=30)
    t = time.monotonic()
    with pytest.raises(FileNotFoundError):
        fs.open_input_stream(str(tmp_path / "nothing.json"))
    assert time.monotonic() - t < 1


def freeze_for(s3, seconds):
    def run():
        os.killpg(s3.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.killpg(s3.proc.pid, signal.SIGCONT)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.2)
    return thread


def test_a_write_during_a_freeze_waits_and_lands_whole(s3):
    """An upload to a frozen store is not cut by the request timeout (measured: pyarrow's
    request_timeout bounds reads and listings, not a PUT): it waits and lands whole."""
    uri = s3.make_bucket("echoray-unit-retrying-fs") + "/run"
    base, path = open_location(uri, "train.storage_path")
    fs = retrying(base, 20, f"train.storage_path {uri}")
    data = os.urandom(1 << 20)
    frozen_s = REQUEST_TIMEOUT_S + 2
    thread = freeze_for(s3, frozen_s)
    t = time.monotonic()
    with fs.open_output_stream(f"{path}/checkpoint_000001/model.pt") as out:
        out.write(data)
    took = time.monotonic() - t
    thread.join()
    assert frozen_s - 0.5 <= took < frozen_s + 10, took
    assert s3.keys(uri) == ["checkpoint_000001/model.pt"]
    assert base.open_input_stream(f"{path}/checkpoint_000001/model.pt").read() == data


def closed_port_store(monkeypatch):
    """An S3 endpoint nothing listens on: every request is refused, as by a store that is down."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    return pafs.FileSystem.from_uri("s3://echoray-down/run")[0]


def test_a_store_that_stays_down_is_retried_for_retry_s_then_named(monkeypatch, caplog):
    fs = retrying(bounded(closed_port_store(monkeypatch), "s3://echoray-down/run"), 2,
                  "train.storage_path s3://echoray-down/run")
    t = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="echoray.storage"):
        with pytest.raises(StoreUnavailable, match=r"^train.storage_path s3://echoray-down/run "
                                                   r"\(echoray-down/run/meta.json\): the object store did not "
                                                   r"answer for \d+ s \(retried for 2 s, half of train.stall_timeout_s\)"):
            with fs.open_output_stream("echoray-down/run/meta.json") as out:
                out.write(b'{"epoch": 1}')
    assert 2 <= time.monotonic() - t < 10  # tried again for retry_s: without the wrapper it failed at once
    assert "object store not answering" in caplog.text
    t = time.monotonic()
    with pytest.raises(StoreUnavailable, match="did not answer"):
        fs.get_file_info("echoray-down/run/checkpoint_000001")
    assert 2 <= time.monotonic() - t < 10


def test_a_tree_of_many_files_copies_into_the_store_with_arrows_threads(s3, tmp_path):
    """pafs.copy_files (Ray Train's and Tune's uploads) calls the handler from Arrow's IO
    threads; an upload on close that needed those threads again deadlocked once every one
    of them held a file (seen: Tune's experiment sync hung). More files than threads."""
    uri = s3.make_bucket("echoray-unit-retrying-fs-tree") + "/run"
    base, path = open_location(uri, "train.storage_path")
    fs = retrying(base, 20, f"train.storage_path {uri}")
    src = tmp_path / "experiment"
    for i in range(3 * pa.io_thread_count()):
        (src / f"trial_{i}").mkdir(parents=True)
        (src / f"trial_{i}" / "result.json").write_text(json.dumps({"i": i}))
    done = threading.Event()
    thread = threading.Thread(target=lambda: (pafs.copy_files(str(src), f"{path}/tune", destination_filesystem=fs,
                                                              use_threads=True), done.set()), daemon=True)
    thread.start()
    assert done.wait(60), "copy_files into the retrying filesystem did not finish in 60 s"
    assert s3.keys(f"{uri}/tune") == sorted(f"trial_{i}/result.json" for i in range(3 * pa.io_thread_count()))
