"""The worker loop's decisions without Ray: WorkerLoop fed in-memory batches of the real
preprocessing (train/local_run.py), with injected collectives for several ranks."""

import copy
import json
import math
import threading

import numpy as np
import pytest
import torch
from thread_ranks import ThreadComm

from echoray.accounting.fresh import FreshTracker
from echoray.accounting.loop_state import LoopState
from echoray.config_load import load_config
from echoray.data.shuffle_buffer import shuffled_batches
from echoray.data.sources import index_source
from echoray.records import CheckpointMeta
from echoray.recovery.checkpoint import Restored
from echoray.train.local_run import (
    LocalCollector,
    local_loop,
    preprocessed_blocks,
)
from echoray.train.loop import check_evals_per_epoch, steps_per_data_epoch
from echoray.worker.link import FreshClock

torch.set_num_threads(1)
BASE = ["train.target=null", "audit.enabled=true", "source.limit=192", "train.max_epochs=2", "train.batch_size=32",
        "model.width=8", "train.checkpoint_every=0"]


def distinct(audit, before_step=None):
    keep = audit["step"] < before_step if before_step is not None else slice(None)
    return len(set(zip(audit["epoch"][keep].tolist(), audit["sample_id"][keep].tolist(), strict=True)))


def run_single(overrides, buffer=256):
    cfg = load_config(None, [*BASE, *overrides])
    idx = index_source(cfg.source)
    col = LocalCollector()
    final = local_loop(cfg, idx, col).run(shuffled_batches(preprocessed_blocks(cfg, idx), 32, buffer, 7))
    return cfg, col, final


@pytest.mark.parametrize(("stage", "factor", "e"), [("none", 1.0, 1), ("before_augment", 2.5, 2.5),
                                                    ("batch", 1.5, 1.5)])
def test_steps_per_data_epoch(stage, factor, e):
    cfg = load_config(None, [f"echo.stage={stage}", f"echo.factor={factor}", "train.batch_size=32"])
    got = [steps_per_data_epoch(cfg, 1000, w) for w in (1, 2, 4)]
    if stage == "before_augment":
        assert got == [int(1000 * e // (32 * w)) for w in (1, 2, 4)]
    else:
        assert got == [max(1, round((1000 // (32 * w)) * e)) for w in (1, 2, 4)]
    assert steps_per_data_epoch(cfg, 10, 4) == (2 if stage == "batch" else 1)  # one fresh step at least


@pytest.mark.parametrize("stage", ["before_augment", "after_augment"])
def test_fresh_count_is_distinct_samples_trained_at_every_evaluation(stage):
    _, col, final = run_single([f"echo.stage={stage}", "echo.factor=2.5"])
    audit = col.audit_columns()
    assert final["fresh_examples"] == distinct(audit)
    # Both epochs trained but for the rows of a last partial batch (drop_last): at most 31.
    assert 2 * 192 - 31 <= distinct(audit) <= 2 * 192
    for ev in col.events:
        assert ev["fresh_examples"] == distinct(audit, ev["step"])
    # The old rule (count copy 0 when trained) falls short mid-run: copies 1 and 2 go first.
    first_eval = col.events[0]["step"]
    assert int((audit["view"][audit["step"] < first_eval] == 0).sum()) < col.events[0]["fresh_examples"]


def test_fresh_tracker_counts_a_sample_once_across_ranks_and_restores():
    e, i = np.zeros(4, np.int64), np.array([1, 1, 2, 3])
    a, b = FreshTracker(), FreshTracker()
    assert a.observe(e[:2], i[:2], [3, 3]) == 1  # copies 0 and 1 of sample 1 on rank 0
    assert b.observe(e[1:], i[1:], [3, 2, 1]) == 3  # its copy 2 on rank 1, and two more samples
    states = [a.to_state(), b.to_state()]
    gather = lambda obj: copy.deepcopy(states)  # noqa: E731 - both ranks saw the same gather
    assert a.reconcile(0, gather) == 0 and b.reconcile(1, gather) == -1  # 1 counted twice: rank 0 keeps it
    assert len(a) == len(b) == 1  # sample 2 (1 of 2 copies seen) stays open on both; sample 1 is done
    again = FreshTracker.from_state(json.loads(json.dumps(a.to_state())))  # rank 0 learnt of sample 2
    assert again.observe(e[:1], np.array([2]), [2]) == 0  # its last copy, on the other rank: not fresh again
    assert len(again) == 1  # ... and only the next reconcile drops it (the global count reaches 2)


@pytest.mark.parametrize("per_epoch", [1, 3])
def test_fresh_clock_ends_epochs_where_a_sum_every_step_would_with_few_sums(per_epoch):
    rng = np.random.default_rng(0)
    fresh = np.cumsum(rng.integers(0, 33, size=(2, 400)), axis=1)  # two ranks, <= 32 fresh per step
    clock = FreshClock(n_train=1000, max_fresh_per_step=64, all_reduce_ints=lambda v: [int(v[0]) + other[0]],
                       per_epoch=per_epoch)
    ends, ends_every, epoch, epoch_every = [], [], 0, 0
    for s in range(400):
        other = [int(fresh[1, s])]
        if clock.due(s + 1, epoch, int(fresh[0, s])):
            ends.append(s + 1)
            epoch += 1
        if fresh[:, s].sum() >= math.ceil((epoch_every + 1) * 1000 / per_epoch):
            ends_every.append(s + 1)
            epoch_every += 1
    assert ends == ends_every and len(ends) >= 5 * per_epoch
    assert clock.checks < 400 / 4 * per_epoch


def test_evals_per_epoch_is_at_most_the_steps_of_an_epoch_at_e_1():
    cfg = load_config(None, [*BASE, "train.evals_per_epoch=7", "echo.stage=before_augment", "echo.factor=3"])
    with pytest.raises(ValueError, match=r"train.evals_per_epoch=7 is more than the 6 optimizer step\(s\)"):
        check_evals_per_epoch(cfg, 192, 1)  # 6 steps at e = 1, whatever the factor


def test_evals_per_epoch_scores_at_fractions_of_an_epoch_with_exact_fresh_counts():
    _, col, final = run_single(["train.evals_per_epoch=3"])  # 6 steps an epoch, 2 epochs
    audit = col.audit_columns()
    assert [ev["step"] for ev in col.events] == [2, 4, 6, 8, 10, 12]
    assert [ev["data_epochs"] for ev in col.events] == [0.3333, 0.6667, 1.0, 1.3333, 1.6667, 2.0]
    assert [ev["fresh_examples"] for ev in col.events] == [distinct(audit, s) for s in (2, 4, 6, 8, 10, 12)]
    assert final["evaluations"] == 6 and final["epochs"] == 2.0


@pytest.mark.parametrize(("stage", "factor", "per_epoch"), [
    ("after_augment", "2", 1), ("before_augment", "2.5", 2), ("batch", "2", 2), ("after_augment", "auto", 2)])
def test_echo_copies_do_not_make_an_epoch_longer(stage, factor, per_epoch):
    """An epoch is 192 fresh examples at any factor: evaluation i falls on the first step
    whose fresh count reaches i x 192 / per_epoch (batch echo: that batch's last repeat;
    the last evaluation: the stream's end), and says the epoch it fell at as fresh / 192."""
    _, col, final = run_single([f"train.evals_per_epoch={per_epoch}", f"echo.stage={stage}",
                                f"echo.factor={factor}"])
    audit = col.audit_columns()
    assert len(col.events) == final["evaluations"] == 2 * per_epoch
    assert col.events[-1]["step"] == final["steps"]
    reps = 2 if stage == "batch" else 1  # batch echo at e = 2 repeats every batch twice
    for i, ev in enumerate(col.events[:-1], start=1):
        assert distinct(audit, ev["step"] - reps) < math.ceil(i * 192 / per_epoch) <= distinct(audit, ev["step"])
    for ev in col.events:
        assert ev["fresh_examples"] == distinct(audit, ev["step"])
        assert ev["data_epochs"] == round(ev["fresh_examples"] / 192, 4)
    assert final["epochs"] == round(final["fresh_examples"] / 192, 4) > 2 - 32 / 192  # < 1 batch untrained


def test_the_last_evaluation_at_the_stream_end_is_checkpointed_like_the_others():
    """With example echo the last evaluation is the stream's end (finish), after epoch 2's
    last copies: its checkpoint is taken there, at the run's last step, nothing pending."""
    cfg = load_config(None, [*BASE, "echo.stage=after_augment", "echo.factor=2"])
    idx = index_source(cfg.source)

    class Every:
        saved: list = []

        def due(self, evals):
            return True

        def save(self, **kw):
            self.saved.append((kw["evals"], kw["steps"], kw["pending"]))

    ckpt = Every()
    final = local_loop(cfg, idx, LocalCollector(), checkpointer=ckpt).run(
        shuffled_batches(preprocessed_blocks(cfg, idx), 32, 256, 7))
    assert [e for e, _, _ in ckpt.saved] == [1, 2] and ckpt.saved[-1][1:] == (final["steps"], None)


def test_checkpoint_state_round_trip_and_missing_fields():
    s = LoopState(evals=3, best=0.5, acc=0.4, eval_step=99, batch_index=7, next_rep=1, reps=2)
    s.counters.add_step(5, 64, 0.1, 0.2)
    s.fresh.observe(np.zeros(1, np.int64), np.array([9]), [3])
    run, rank = json.loads(json.dumps(s.to_checkpoint(train_s=4.0)))
    back = LoopState.from_checkpoint(run, rank)
    assert back.to_checkpoint() == s.to_checkpoint(train_s=4.0)
    assert back.counters.fresh == 5 and len(back.fresh) == 1 and back.train_s == 4.0
    del rank["batch_index"]
    with pytest.raises(KeyError, match="batch_index"):
        LoopState.from_checkpoint(run, rank)


class Crash(RuntimeError):
    pass


class SaveThenCrash:
    """Checkpoints after the first epoch, then fails as a killed worker would."""

    def __init__(self, loop_ref):
        self.loop_ref, self.saved = loop_ref, None

    def due(self, evals):
        return evals == 1

    def save(self, **kw):
        loop = self.loop_ref[0]
        self.saved = {**copy.deepcopy({k: v for k, v in kw.items() if k not in ("model", "opt")}),
                      "model": copy.deepcopy(loop.model.state_dict()), "opt": copy.deepcopy(loop.opt.state_dict()),
                      "consumed": loop.consumed.keep_from(0)}
        raise Crash


@pytest.mark.parametrize(("stage", "factor"), [("before_augment", "1.5"), ("after_augment", "auto")])
def test_restore_from_a_checkpoint_continues_with_exact_counts(stage, factor):
    # auto: echoed on the worker at the collector's 2.5; the checkpoint holds its pool of echoed rows
    cfg = load_config(None, [*BASE, f"echo.stage={stage}", f"echo.factor={factor}"])
    idx = index_source(cfg.source)
    ref, col = [], LocalCollector(factor=2.5)
    ckpt = SaveThenCrash(ref)
    ref.append(local_loop(cfg, idx, col, checkpointer=ckpt))
    with pytest.raises(Crash):
        ref[0].run(shuffled_batches(preprocessed_blocks(cfg, idx), 32, 256, 7))
    saved = json.loads(json.dumps({k: ckpt.saved[k] for k in ("loop_state", "rank_state")}))
    assert len(saved["rank_state"]["fresh"]["keys"]) > 0  # samples with copies still to come
    loop = local_loop(cfg, idx, col)
    loop.model.load_state_dict(ckpt.saved["model"])
    loop.opt.load_state_dict(ckpt.saved["opt"])
    if factor == "auto":
        assert len(ckpt.saved["pending"]["sample_id"]) > 0  # the pool, saved as the pending rows
    meta = CheckpointMeta(evals=ckpt.saved["evals"], steps=ckpt.saved["steps"], first_open_pass=0, world_size=1,
                          state=saved["loop_state"], history=ckpt.saved["history"])
    restored = Restored(meta, saved["rank_state"], ckpt.saved["consumed"], ckpt.saved["pending"])
    final = loop.run(shuffled_batches(preprocessed_blocks(cfg, idx, 0, ckpt.saved["consumed"]), 32, 256, 8), restored)
    audit = col.audit_columns()
    rows = list(zip(audit["epoch"].tolist(), audit["sample_id"].tolist(), audit["view"].tolist(), strict=True))
    assert len(rows) == len(set(rows)) == final["trained_examples"]  # no row trained twice or lost
    assert final["fresh_examples"] == distinct(audit) > 2 * 192 - 32  # the stream's tail: < 1 batch untrained
    # any factor: the second (last) evaluation is the stream's end, after epoch 2's last copies
    assert [ev["epoch"] for ev in col.events] == [1, 2] and col.events[-1]["step"] == final["steps"]


class Scripted:
    """Held-out accuracy per evaluation, as the all-reduced EvalSet would return it."""

    def __init__(self, accuracies):
        self.accuracies, self.calls = accuracies, 0

    def evaluate(self, model, normalize, batch_size):
        self.calls += 1
        return int(self.accuracies[self.calls - 1] * 100), 100, 0


def run_ranks(overrides, accuracies, world=2):
    cfg = load_config(None, [*BASE, "train.max_epochs=4", *overrides])
    idx = index_source(cfg.source)
    comm, col, finals = ThreadComm(world), LocalCollector(), [None] * world
    rows = list(preprocessed_blocks(cfg, idx))
    rows = {k: np.concatenate([b[k] for b in rows]) for k in rows[0]}
    share = len(rows["sample_id"]) // world  # equal shares, as streaming_split(equal=True) hands out

    def rank(r):
        mine = {k: v[r * share : (r + 1) * share] for k, v in rows.items()}
        blocks = [{k: v[i : i + 64] for k, v in mine.items()} for i in range(0, share, 64)]
        loop = local_loop(cfg, idx, col, comm.for_rank(r), r, world, Scripted(accuracies))
        finals[r] = (loop.run(shuffled_batches(blocks, 32, 128, r)), loop.state)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return col, finals


def test_ranks_stop_together_when_the_target_is_reached():
    col, finals = run_ranks(["train.target=0.6"], [0.3, 0.6, 0.9, 0.9])
    (final, s0), (_, s1) = finals
    assert final["stop_reason"] == "target reached" and final["epochs"] == 2
    assert s0.counters.steps == s1.counters.steps == 2 * steps_per_data_epoch(load_config(None, BASE), 192, 2)
    assert final["to_target"]["accuracy"] == 0.6 and [e["epoch"] for e in col.events] == [1, 2]


def test_ranks_stop_together_on_the_fresh_budget_under_auto_echo():
    col, finals = run_ranks(["echo.stage=after_augment", "echo.factor=auto", "train.max_fresh_examples=200"],
                            [0.1] * 4)
    (final, s0), (_, s1) = finals
    assert final["stop_reason"] == "max_fresh_examples reached"
    assert s0.counters.steps == s1.counters.steps and final["fresh_examples"] >= 200
    assert col.events[0]["fresh_examples"] >= 192  # an auto epoch ends at a training split of fresh examples


def test_bf16_steps_on_cpu_and_fp16_is_refused_without_a_gpu():
    _, col, final = run_single(["train.precision=bf16", "train.channels_last=true", "train.max_epochs=1"])
    assert np.isfinite(col.events[-1]["loss"]) and final["steps"] == 192 // 32
    from echoray.train.device import Precision

    with pytest.raises(ValueError, match="train.precision: fp16 needs a GPU"):
        Precision("fp16", torch.device("cpu"))
    with pytest.raises(Exception, match="train.precision: fp16 needs a GPU"):
        load_config(None, ["train.precision=fp16", "scaling.use_gpu=false"])
