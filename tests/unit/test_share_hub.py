"""The StreamHub's logic (tune/share_hub.py) in one process: its producer thread, the
consumers' attach/take/detach/skip, backpressure, eviction of a stalled consumer and
errors. The producer is fed from a list of numpy blocks instead of its pool of
preprocessing actors (`_open`), and keeps the blocks themselves instead of ObjectRefs:
everything else is the actor's own code."""

import threading
import time

import numpy as np
import pytest

from echoray.tune.read_counts import ReadCounter
from echoray.tune.share_hub import HubSpec, StreamHub
from echoray.tune.share_producer import Produced


class ListHub(StreamHub):
    def __init__(self, spec: HubSpec, blocks: list[dict], fail: Exception | None = None):
        super().__init__(spec)
        self.source, self.fail = blocks, fail

    def _open(self):
        if self.fail is not None:
            raise self.fail
        self.reads = ReadCounter(10_000)
        return ListPool(self.source)


class ListPool:
    """ProducerPool's calls (tune/share_producer.py) over a list: each block, in order."""

    def __init__(self, source: list[dict]):
        self.source = iter(source)
        self.closed = False

    def next(self):
        b = next(self.source, None)
        if b is None:
            return None
        return Produced(len(b["sample_id"]), sum(v.nbytes for v in b.values()), b["epoch"], b["sample_id"]), b

    def close(self) -> tuple[int, int]:
        self.closed = True
        return 0, 0


def spec(trials, window_rows: int = 10, stall_s: float = 30.0) -> HubSpec:
    return HubSpec(group="g0", key="k", config={}, trials=tuple(trials), epochs=1, window_rows=window_rows,
                   stall_timeout_s=stall_s)


def blocks(n_blocks: int, rows: int = 5) -> list[dict]:
    return [{"sample_id": np.arange(i * rows, (i + 1) * rows), "epoch": np.zeros(rows, np.int64)}
            for i in range(n_blocks)]


def read_all(hub: StreamHub, trial: str, out: list, pause_s: float = 0.0, attach: bool = True) -> None:
    if attach:
        hub.attach(trial)
    while True:
        kind, items, rows = hub.take(trial, 1.0)
        if kind == "end":
            break
        if kind == "block":
            out.append(int(items[0]["sample_id"][0]))
            time.sleep(pause_s)
    hub.detach(trial, 5 * len(out), "done")


def wait_until(predicate, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_two_consumers_read_every_block_once_in_order_from_one_production():
    hub = ListHub(spec(["a", "b"]), blocks(12))
    got = {"a": [], "b": []}
    assert hub.attach("a") == hub.attach("b") == 0
    threads = [threading.Thread(target=read_all, args=(hub, t, got[t], 0.01 if t == "b" else 0.0, False))
               for t in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert got["a"] == got["b"] == [5 * i for i in range(12)]  # b slower: a waited for it at the window
    assert hub.blocks == 12 and hub.window.head == 60
    assert hub.reads.summary() == {0: {"rows": 60, "distinct": 60, "max_count": 1, "late_rows": 0}}
    assert hub.window.peak_rows <= 10 + 5  # the bound, plus one block
    hub.thread.join(5)
    r = hub.report()
    assert [(c["trial"], c["start_row"], c["rows_taken"], c["ended"]) for c in r["consumers"]] == [
        ("a", 0, 60, "done"), ("b", 0, 60, "done")]
    assert r["produced_rows"] == 60 and r["error"] is None and r["window"]["finished"]


def test_the_producer_waits_on_a_full_window_and_stops_when_the_group_is_done():
    hub = ListHub(spec(["a", "b"]), blocks(100))
    hub.attach("a")  # takes nothing
    wait_until(lambda: hub.window.held_rows() >= 10)
    time.sleep(0.2)
    assert hub.window.head == 10 and hub.blocks == 2  # backpressure: no more than the bound
    assert hub.take("a", 0.1)[0] == "block"
    wait_until(lambda: hub.window.head == 15)  # room for one block again
    hub.detach("a", 5, "target reached")
    assert not hub.stopping  # "b" may still come
    hub.skip("b", "finished earlier")
    assert hub.stopping
    hub.thread.join(5)
    assert not hub.thread.is_alive() and hub.blocks < 100 and hub.state()["producer_running"] is False


def test_a_stalled_consumer_is_detached_and_the_others_go_on():
    hub = ListHub(spec(["stuck", "b"], stall_s=0.3), blocks(8))
    hub.attach("stuck")
    got = []
    reader = threading.Thread(target=read_all, args=(hub, "b", got))
    reader.start()
    reader.join(10)
    assert got == [5 * i for i in range(8)]  # b read to the end although "stuck" never took a block
    assert "stuck" in hub.evicted and "took no block" in hub.evicted["stuck"]
    with pytest.raises(RuntimeError, match="took no block of shared stream g0"):
        hub.take("stuck", 0.1)


def test_a_consumer_that_attaches_later_starts_where_the_slowest_stands():
    hub = ListHub(spec(["a", "late"], window_rows=20), blocks(10))
    hub.attach("a")
    wait_until(lambda: hub.window.held_rows() >= 20)
    hub.take("a", 1.0), hub.take("a", 1.0)  # a at row 10
    assert hub.attach("late") == 10
    assert int(hub.take("late", 1.0)[1][0]["sample_id"][0]) == 10


def test_a_failed_producer_fails_every_take_and_names_the_group():
    hub = ListHub(spec(["a"]), [], fail=OSError("bucket gone"))
    hub.attach("a")
    hub.thread.join(5)
    with pytest.raises(RuntimeError, match=r"stream of group g0 \(trials a\) failed: OSError: bucket gone"):
        hub.take("a", 0.1)


def test_a_trial_outside_the_group_is_refused():
    hub = ListHub(spec(["a"]), blocks(1))
    with pytest.raises(ValueError, match="trial zz is not in shared stream group g0"):
        hub.attach("zz")


class FolderHub(ListHub):
    """A hub whose group reads a real JPEG folder: its held-out decode is the actor's own
    code; its ObjectRefs are the records themselves."""

    def __init__(self, spec: HubSpec, idx):
        super().__init__(spec, [])
        self.idx, self.decoded = idx, 0

    def _source(self):
        return None, self.idx

    def _decode_held_out(self, out_size):
        self.decoded += 1
        time.sleep(0.05)  # the others ask while the first decodes
        return super()._decode_held_out(out_size)

    def _put(self, value):
        return value


def folder_index(root, holdout_fraction=0.25):
    from echoray.config import SourceConfig
    from echoray.data.sources import index_source

    return index_source(SourceConfig(kind="image_folder", path=str(root), image_size=32,
                                     holdout_fraction=holdout_fraction))


def ask_together(hub: StreamHub, n: int, out_size) -> list:
    """n trials ask for the held-out set at once: what each got, or the exception it raised."""
    got = [None] * n

    def ask(i):
        try:
            got[i] = hub.held_out(out_size)
        except Exception as exc:  # noqa: BLE001 - the test compares what each caller saw
            got[i] = exc

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return got


def test_the_held_out_set_is_decoded_once_for_every_trial_that_asks(tmp_path):
    from echoray.data.fixtures import write_jpeg_folder
    from echoray.train.evaluate import EvalSet

    idx = folder_index(write_jpeg_folder(tmp_path / "jpg", n=40))
    hub = FolderHub(spec(["a", "b", "c", "d"]), idx)
    got = ask_together(hub, 4, 24)
    assert hub.decoded == 1 and all(g[0] is got[0][0] for g in got)  # one record, handed to all four
    (held,) = got[0]
    private = EvalSet(idx, 0, 1, 24).held_out()  # what a trial decoding its own would keep
    assert held.rows == len(idx.eval_ids) == 10 and held.bad == private.bad == {}
    for mine, theirs in zip(held.chunks, private.chunks, strict=True):
        for a, b in zip(mine, theirs, strict=True):
            np.testing.assert_array_equal(a, b)
    assert held.chunks[0][0].shape == (10, 24, 24, 3)
    hub.held_out(32)  # another crop size: its own decode
    assert hub.decoded == 2
    assert hub.report()["held_out"] == [
        {"out_size": 24, "rows": 10, "asks": 4, "decode_s": hub.held[24][0].decode_s, "error": None},
        {"out_size": 32, "rows": 10, "asks": 1, "decode_s": hub.held[32][0].decode_s, "error": None}]


def test_a_held_out_set_over_the_cache_bound_is_left_to_each_trial(tmp_path, monkeypatch):
    from echoray.data import held_out
    from echoray.data.fixtures import write_jpeg_folder

    idx = folder_index(write_jpeg_folder(tmp_path / "jpg", n=40))
    monkeypatch.setattr(held_out, "CACHE_LIMIT_BYTES", 10 * 24 * 24 * 3 - 1)  # one byte short
    hub = FolderHub(spec(["a", "b"]), idx)
    assert ask_together(hub, 2, 24) == [None, None]
    assert hub.report()["held_out"][0]["rows"] == 0


def test_a_failed_held_out_decode_is_every_trials_error_and_is_not_retried(tmp_path):
    from echoray.data.fixtures import write_jpeg_folder
    from echoray.data.sources import SourceError

    root = write_jpeg_folder(tmp_path / "jpg", n=40)
    idx = folder_index(root)
    for f in root.rglob("*.jpg"):
        f.write_bytes(b"not a jpeg")
    hub = FolderHub(spec(["a", "b", "c"]), idx)
    got = ask_together(hub, 3, 24)
    assert hub.decoded == 1
    assert all(isinstance(g, SourceError) and "10 undecodable held-out image(s)" in str(g) for g in got)
    (rec,) = hub.report()["held_out"]
    assert rec["asks"] == 3 and rec["rows"] == 0 and rec["error"].startswith("SourceError: 10 undecodable")
