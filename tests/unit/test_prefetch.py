"""train/prefetch.py and the worker loop's overlapped input path: the batches made on a
thread ahead of the step are exactly those the serial loop makes (sample ids, order,
echo copies, augmentation keys, losses), at most one batch ahead, errors raised in place."""

import copy
import json
import threading
import time

import numpy as np
import pytest
import torch

from echoray.config_load import load_config
from echoray.data.shuffle_buffer import shuffled_batches
from echoray.data.sources import index_source
from echoray.records import CheckpointMeta
from echoray.recovery.checkpoint import Restored
from echoray.train.local_run import LocalCollector, local_loop, preprocessed_blocks
from echoray.train.prefetch import Prefetch

torch.set_num_threads(1)
BASE = ["train.target=null", "audit.enabled=true", "source.limit=192", "train.max_epochs=2", "train.batch_size=32",
        "model.width=8", "train.checkpoint_every=0", "train.evals_per_epoch=2"]


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_prefetch_yields_every_item_prepared_in_order(depth):
    with Prefetch(range(50), lambda i: i * i, depth) as work:
        assert list(work) == [(i, i * i) for i in range(50)]


def test_prefetch_runs_at_most_depth_items_ahead_of_the_consumer():
    pulled, held = [], []

    def items():
        for i in range(20):
            pulled.append(i)
            yield i

    with Prefetch(items(), lambda i: threading.current_thread().name, 1) as work:
        for i, thread in work:
            assert thread == "echoray-prefetch"  # prepared off the consumer's thread
            deadline = time.monotonic() + 5
            while len(pulled) < min(i + 2, 20) and time.monotonic() < deadline:
                time.sleep(0.001)  # the thread pulls the next item while this one is held
            time.sleep(0.01)
            held.append(len(pulled) - 1 - i)
    assert held[:-1] == [1] * 19 and held[-1] == 0  # exactly one item ahead, never two


def test_prefetch_raises_the_error_at_the_item_where_it_happened():
    def prepare(i):
        if i == 3:
            raise ValueError("bad batch 3")
        return i

    got = []
    with pytest.raises(ValueError, match="bad batch 3"), Prefetch(range(10), prepare, 1) as work:
        for i, _ in work:
            got.append(i)
    assert got == [0, 1, 2]


def test_prefetch_close_stops_the_thread_after_its_item():
    work = Prefetch(range(1000), lambda i: i, 1)
    first = next(iter(work))
    work.close()
    work._thread.join(timeout=5)
    assert first == (0, 0) and not work._thread.is_alive()


def run(overrides, lookahead, factor=1.0):
    cfg = load_config(None, [*BASE, *overrides])
    idx = index_source(cfg.source)
    col = LocalCollector(factor=factor)
    loop = local_loop(cfg, idx, col)
    loop.lookahead = lookahead
    overlapped = loop.overlaps_input()
    final = loop.run(shuffled_batches(preprocessed_blocks(cfg, idx), 32, 256, 7))
    return overlapped, col, final


@pytest.mark.parametrize(("overrides", "factor"), [
    ([], 1.0),
    (["echo.stage=batch", "echo.factor=2.5"], 1.0),
    (["echo.stage=before_augment", "echo.factor=2.5"], 1.0),
    (["echo.stage=after_augment", "echo.factor=auto"], 2.5),  # copies made at consumption, on the thread
    (["preprocess.augment.on=worker", "batch_augmentation.copies=2"], 1.0),  # views made in make_inputs
])
def test_the_overlapped_loop_trains_exactly_the_serial_loops_batches(overrides, factor):
    serial_on_thread, serial_col, serial = run(overrides, 0, factor)
    overlapped, col, final = run(overrides, 1, factor)
    assert overlapped and not serial_on_thread
    a, b = serial_col.audit_columns(), col.audit_columns()
    assert set(a) == set(b) and len(a["sample_id"]) > 0
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)  # ids, order, copies, views, keys, steps
    assert [e["loss"] for e in serial_col.events] == [e["loss"] for e in col.events]
    assert [e["metric"] for e in serial_col.events] == [e["metric"] for e in col.events]
    for k in ("steps", "fresh_examples", "trained_examples", "trained_samples", "best_metric", "extra_copies"):
        assert serial[k] == final[k], k


class SaveThenStop(RuntimeError):
    pass


def test_a_checkpoint_under_auto_saves_the_batch_made_ahead_and_a_restore_trains_every_row_once():
    """auto at consumption: the batch the thread took from the pool ahead of the step is
    logged consumed; the checkpoint saves it first among the pending rows, so the restored
    run trains it (and nothing twice)."""
    cfg = load_config(None, [*BASE, "echo.stage=after_augment", "echo.factor=auto", "train.evals_per_epoch=1"])
    idx = index_source(cfg.source)
    col, saved, loops = LocalCollector(factor=2.5), {}, []

    class Checkpointer:
        def due(self, evals):
            return evals == 1

        def save(self, **kw):
            loop = loops[0]
            (((ahead, _, _), _),) = loop.input.ahead.held()  # the thread is one batch ahead
            saved.update(kw, model=copy.deepcopy(loop.model.state_dict()), opt=copy.deepcopy(loop.opt.state_dict()),
                         consumed=loop.consumed.keep_from(0), ahead=ahead)
            raise SaveThenStop

    loops.append(local_loop(cfg, idx, col, checkpointer=Checkpointer()))
    assert loops[0].overlaps_input()
    with pytest.raises(SaveThenStop):
        loops[0].run(shuffled_batches(preprocessed_blocks(cfg, idx), 32, 256, 7))
    n = len(saved["ahead"]["sample_id"])
    assert n == 32 and len(saved["pending"]["sample_id"]) > n
    for k in saved["ahead"]:
        np.testing.assert_array_equal(saved["pending"][k][:n], saved["ahead"][k])
    state = json.loads(json.dumps({k: saved[k] for k in ("loop_state", "rank_state")}))
    loop = local_loop(cfg, idx, col)
    loop.model.load_state_dict(saved["model"])
    loop.opt.load_state_dict(saved["opt"])
    meta = CheckpointMeta(evals=saved["evals"], steps=saved["steps"], first_open_pass=0, world_size=1,
                          state=state["loop_state"], history=saved["history"])
    restored = Restored(meta, state["rank_state"], saved["consumed"], saved["pending"])
    final = loop.run(shuffled_batches(preprocessed_blocks(cfg, idx, 0, saved["consumed"]), 32, 256, 8), restored)
    audit = col.audit_columns()
    rows = list(zip(audit["epoch"].tolist(), audit["sample_id"].tolist(), audit["view"].tolist(), strict=True))
    assert len(rows) == len(set(rows)) == final["trained_examples"]  # no row trained twice or lost
    ahead = set(zip(saved["ahead"]["epoch"].tolist(), saved["ahead"]["sample_id"].tolist(),
                    saved["ahead"]["echo_copy"].tolist(), strict=True))
    assert ahead <= set(rows)  # the batch made ahead was trained after the restore
    samples = set(zip(audit["epoch"].tolist(), audit["sample_id"].tolist(), strict=True))
    assert final["fresh_examples"] == len(samples) > 2 * 192 - 32
