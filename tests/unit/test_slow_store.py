"""The benchmarks' emulated slow store (benchmarks/slow_store.py, source.kind
slow_store:SlowStore): what each training read waits, read through echoray's own
reader contract, and the refusal of the removed source.remote."""

import time

import numpy as np
import pytest
import slow_store
from slow_store import SlowStore, Store

from echoray.config_load import ConfigError, load_config
from echoray.data.fixtures import write_image_folder
from echoray.data.sources import SourceError, index_source, open_reader


def slow(*extra: str, options: str = "{inner: digits, latency_ms: 20}"):
    return load_config(None, ["source.kind=slow_store:SlowStore", f"source.options={options}", *extra]).source


class FakeTime:
    """SlowStore's clock and sleep: the clock moves only by what the reads slept and `advance`."""

    def __init__(self, monkeypatch):
        self.now, self.slept = 100.0, []
        monkeypatch.setattr(SlowStore, "clock", staticmethod(lambda: self.now))
        monkeypatch.setattr(SlowStore, "sleep", staticmethod(self.sleep))

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def test_requests_in_flight_overlap_their_latency_and_bytes_take_the_bandwidth():
    store = Store(inner="digits", latency_ms=20)
    assert store.wait_s(32, 0, 1, 0.0) == pytest.approx(0.64)
    assert store.wait_s(32, 0, 16, 0.0) == pytest.approx(0.04)
    assert store.wait_s(33, 0, 16, 0.0) == pytest.approx(0.06)
    assert Store(inner="digits", latency_ms=20, bandwidth_mb_s=100).wait_s(32, 10**8, 64, 0.0) == pytest.approx(1.02)
    changing = Store(inner="digits", latency_ms=40, change_after_s=0.05, latency_ms_after=20)
    assert [changing.latency_at(t) for t in (0.0, 0.049, 0.05, 9.0)] == [40, 40, 20, 20]


def test_reads_wrap_the_inner_source_and_wait_per_chunk(monkeypatch):
    cfg = slow("source.limit=64", "source.chunk_size=4",
               options="{inner: digits, latency_ms: 20, change_after_s: 0.1, latency_ms_after: 5, read_concurrency: 1}")
    idx = index_source(cfg)
    assert (idx.kind, idx.read_concurrency) == ("slow_store:SlowStore", 1)
    reader, plain = open_reader(idx), open_reader(index_source(load_config(None, ["source.limit=64"]).source))
    t = FakeTime(monkeypatch)
    ids = np.array([3, 4, 5, 6, 40, 41, 42, 43], dtype=np.int64)
    images, labels = reader.read(ids, "train")
    want_images, want_labels = plain.read(ids, "train")
    assert np.array_equal(images, want_images) and np.array_equal(labels, want_labels)
    assert t.slept == [pytest.approx(0.04)]  # 2 chunks of 4, one request each, one in flight
    reader.read(ids, "train")  # 40 ms after the first read: still 20 ms per request
    reader.read(ids[:4], "train")  # 80 ms
    reader.read(ids, "train")  # 100 ms: change_after_s has passed
    assert t.slept[1:] == [pytest.approx(0.04), pytest.approx(0.02), pytest.approx(0.01)]
    reader.read(ids, "eval")
    assert len(t.slept) == 4  # held-out reads are not slowed


def test_one_request_per_file_and_16_in_flight_unless_set(tmp_path, monkeypatch):
    root = write_image_folder(tmp_path / "imgs", n=60, classes=3, size=16)
    idx = index_source(slow(f"source.path={root}", options="{inner: image_folder, latency_ms: 10}"))
    assert idx.shuffled_reads and idx.read_concurrency == 16  # a store with latency: 16 in flight
    t = FakeTime(monkeypatch)
    images, labels = open_reader(idx).read(idx.train_ids[:20], "train")
    assert images.shape == (20, 16, 16, 3) and t.slept == [pytest.approx(0.02)]  # ceil(20 / 16) x 10 ms
    bandwidth_only = index_source(slow(f"source.path={root}", options="{inner: image_folder, bandwidth_mb_s: 1}"))
    assert bandwidth_only.read_concurrency == 1
    open_reader(bandwidth_only).read(idx.train_ids[:4], "train")
    assert t.slept[1] == pytest.approx(4 * 16 * 16 * 3 / 1e6)


def test_a_read_really_waits():
    reader = open_reader(index_source(slow("source.limit=64", "source.chunk_size=8",
                                           options="{inner: digits, latency_ms: 50, read_concurrency: 1}")))
    t0 = time.monotonic()
    reader.read(np.arange(32, dtype=np.int64), "train")  # 4 chunks, one at a time: 200 ms
    assert 0.2 <= time.monotonic() - t0 < 0.2 + 0.5  # sleeps at least that, tolerance for a busy machine


@pytest.mark.parametrize("options, named", [
    ("{latency_ms: 20}", "source.options of source.kind 'slow_store:SlowStore': inner: Field required"),
    ("{inner: digits, change_after_s: 1}", "(options): change_after_s and latency_ms_after go together"),
    ("{inner: digits, latency: 1}", "latency: Extra inputs are not permitted"),
    ("{inner: 'slow_store:SlowStore'}", "source.options.inner 'slow_store:SlowStore'"),
    ("{inner: image_folder}", "source.options.inner 'image_folder': source.path is required"),
])
def test_bad_options_name_the_key(options, named):
    with pytest.raises(SourceError) as err:
        index_source(slow(options=options))
    assert named in str(err.value)


def test_the_removed_source_remote_names_the_slow_store(tmp_path):
    want = ("source.remote: this key was removed (emulate a slow store with the benchmarks reader, "
            "source.kind: slow_store:SlowStore (benchmarks/slow_store.py))")
    with pytest.raises(ConfigError) as err:
        load_config(None, ["source.remote.latency_ms=28"])
    assert str(err.value) == f"--set source.remote.latency_ms: {want}"
    yaml_file = tmp_path / "p.yaml"
    yaml_file.write_text("source:\n  remote: {latency_ms: 28}\n")
    with pytest.raises(ConfigError) as err:
        load_config(yaml_file)
    assert want in str(err.value) and str(yaml_file) in str(err.value)
    assert slow_store.KIND == "slow_store:SlowStore"


def test_text_behind_the_store_reads_the_text_sources_units_and_waits_per_piece(repo, tmp_path, monkeypatch):
    """inner: text: the index is the text source's (kind "text", this reader named as its
    reader), read_units returns the plain reader's rows, and a training read waits one
    latency per piece of each unit plus its bytes at the bandwidth."""
    for i in range(6):
        (tmp_path / f"doc{i}.txt").write_text("".join(f"line {i} {j} of the kernel docs\n" for j in range(120)))
    text = ["source.seq_len=32", "source.text_suffixes=[.txt]", f"source.path={tmp_path}"]
    pipeline = repo / "pipelines" / "lm_linux_doc.yaml"
    cfg = load_config(pipeline, [*text, "source.kind=slow_store:SlowStore",
                                 "source.options={inner: text, latency_ms: 20, bandwidth_mb_s: 1, read_concurrency: 1}"]).source
    idx, plain_idx = index_source(cfg), index_source(load_config(pipeline, text).source)
    assert (idx.kind, idx.reader, plain_idx.reader) == ("text", "slow_store:SlowStore", None)
    assert np.array_equal(idx.train_ids, plain_idx.train_ids)
    reader, plain = open_reader(idx), open_reader(plain_idx)
    t = FakeTime(monkeypatch)
    units = np.array([0, 2, 3], dtype=np.int64)
    epochs = np.zeros(3, dtype=np.int64)
    got, want = reader.read_units("train", epochs, units), plain.read_units("train", epochs, units)
    assert all(np.array_equal(got[k], want[k]) for k in want)
    pieces = sum(len(idx.details["train_units"][u]) for u in units)
    n_bytes = sum(stop - start for u in units for _, start, stop in idx.details["train_units"][u])
    assert t.slept == [pytest.approx(pieces * 0.02 + n_bytes / 1e6)]
    reader.read_units("eval", epochs[:1], units[:1])  # held-out reads are not slowed
    assert len(t.slept) == 1


def test_an_lm_on_a_reader_of_images_is_refused_naming_the_kind():
    with pytest.raises(ConfigError, match="source.kind: text goes with model.name: transformer_lm"):
        load_config(None, ["model.name=transformer_lm", "train.metric=bits_per_byte"])
