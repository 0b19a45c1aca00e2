"""Elastic resume (recovery/reshard.py): a run checkpointed by W workers and continued by N
trains every remaining (epoch, sample, echo copy) exactly once and counts every sample
fresh exactly once, every rank simulated in one process with the real read plan, echo,
consumed log, replay and fresh tracker (pure numpy; the Ray run is
tests/integration/test_elastic_resume.py)."""

import contextlib
import copy
import json
import shutil
import threading
from collections import Counter

import numpy as np
import pytest
import torch
from thread_ranks import ThreadComm

from echoray.accounting.consumed import (
    ConsumedLog,
    drop_consumed,
    expected_rows,
    first_open_epoch,
    row_keys,
)
from echoray.accounting.counters import Counters
from echoray.accounting.fresh import FreshTracker
from echoray.accounting.loop_state import LoopState
from echoray.config_load import load_config
from echoray.data.echo import echo_rows
from echoray.data.plan import sample_order
from echoray.data.shuffle_buffer import shuffled_batches
from echoray.data.sources import index_source
from echoray.records import CheckpointMeta
from echoray.recovery import checkpoint
from echoray.recovery.checkpoint import Restored
from echoray.recovery.reshard import reshard_rank_states, split_rows
from echoray.train.groups import reading_ranks
from echoray.train.local_run import LocalCollector, local_loop, preprocessed_blocks
from echoray.train.loop import steps_per_data_epoch
from echoray.train.schedule_position import schedule_epochs

SEED, EPOCHS, FACTOR, BLOCK, BATCH = 3, 3, 1.5, 7, 4
IDS = np.arange(200, 260, dtype=np.int64)  # 60 training ids


def stream(first_epoch=0, consumed=None):
    """The multi-epoch stream from `first_epoch`, echoed, without the rows `consumed`."""
    parts = []
    for e in range(first_epoch, EPOCHS):
        sid = IDS[sample_order(SEED, e, len(IDS))]
        parts.append(echo_rows({"epoch": np.full(len(sid), e, np.int64), "sample_id": sid,
                                "echo_copy": np.zeros(len(sid), np.int64)}, FACTOR, SEED))
    rows = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return drop_consumed(rows, consumed)


def split(rows, world):
    """Blocks of BLOCK rows dealt to the ranks in turn (as streaming_split hands out blocks)."""
    n = len(rows["sample_id"])
    out = [[] for _ in range(world)]
    for b, start in enumerate(range(0, n, BLOCK)):
        out[b % world].append(np.arange(start, min(start + BLOCK, n)))
    return [{k: v[np.concatenate(at)] if at else v[:0] for k, v in rows.items()} for at in out]


def train(shards, states, logs, trained, steps=None):
    """Every rank takes BATCH rows a step, in lockstep, for `steps` steps (None: until its
    shard is used up); returns the rows each rank had taken."""
    taken = [0] * len(shards)
    step = 0
    while steps is None or step < steps:
        moved = False
        for r, shard in enumerate(shards):
            at = slice(taken[r], taken[r] + BATCH)
            batch = {k: v[at] for k, v in shard.items()}
            if not len(batch["sample_id"]):
                continue
            moved, taken[r] = True, taken[r] + len(batch["sample_id"])
            s = states[r]
            s.counters.add_step(s.fresh.observe(batch["epoch"], batch["sample_id"], batch["echo_copies"]),
                                len(batch["sample_id"]), 0.0, 0.0)
            logs[r].add(batch["epoch"], batch["sample_id"], batch["echo_copy"])
            trained.update(zip(batch["epoch"].tolist(), batch["sample_id"].tolist(), batch["echo_copy"].tolist(),
                               strict=True))
        step += 1
        if not moved:
            break
    return taken


def reconcile(states):
    """FreshTracker.reconcile on every rank, as the collective at an evaluation."""
    tables = [s.fresh.to_state() for s in states]
    for r, s in enumerate(states):
        s.counters.fresh += s.fresh.reconcile(r, lambda _, t=tables: t)


def checkpoint_parts(states, logs):
    """What the ranks write at a checkpoint: the first open plan epoch, the union of the
    consumed keys from it on (recovery/checkpoint.py _consumed), every rank's state part."""
    rows = sum(log.counts(EPOCHS)[0] for log in logs)
    fresh = sum(log.counts(EPOCHS)[1] for log in logs)
    start = first_open_epoch(rows, fresh, lambda e: expected_rows(SEED, e, IDS, "before_augment", FACTOR),
                             len(IDS))
    union = {}
    for log in logs:
        for e, keys in log.keep_from(start).items():
            union[e] = np.union1d(union.get(e, keys[:0]), keys)
    parts = [s.to_checkpoint()[1] for s in states]
    return start, union, parts


@pytest.mark.parametrize("old, new", [(2, 1), (2, 4), (2, 3), (1, 2), (4, 2), (2, 2)])
@pytest.mark.parametrize("part", [0.15, 0.45])  # checkpointed mid-epoch 0, mid-epoch 1
def test_a_run_resumed_with_another_worker_count_trains_every_row_once(old, new, part):
    trained = Counter()
    steps_before = int(len(stream()["sample_id"]) * part) // (old * BATCH)
    states, logs = [LoopState() for _ in range(old)], [ConsumedLog() for _ in range(old)]
    train(split(stream(), old), states, logs, trained, steps_before)
    reconcile(states)  # the evaluation before the checkpoint
    start, consumed, parts = checkpoint_parts(states, logs)
    run_part = states[0].to_checkpoint()[0]

    readers = reading_ranks(new, 1, "local")
    resumed = [LoopState.from_checkpoint(run_part, p) for p in reshard_rank_states(parts, readers)]
    logs = [ConsumedLog(consumed if r == 0 else None) for r in range(new)]
    train(split(stream(start, consumed), new), resumed, logs, trained)
    reconcile(resumed)

    whole = stream()
    every = Counter(zip(whole["epoch"].tolist(), whole["sample_id"].tolist(), whole["echo_copy"].tolist(),
                        strict=True))
    assert trained == every and set(trained.values()) == {1}  # each (epoch, sample, copy) once
    assert sum(s.counters.fresh for s in resumed) == len(IDS) * EPOCHS
    assert sum(s.counters.trained for s in resumed) == len(whole["sample_id"])
    # no sample still waits for a copy on the rank that counted it
    assert not any(entry[2] for s in resumed for entry in s.fresh.table.values())


def test_resharding_keeps_every_sum_and_the_shared_counts():
    old = [{"counters": {"fresh": 10, "trained": 15, "samples": 15, "steps": 6, "wait_s": 1.5, "step_s": 2.0,
                         "extra": 1},
            "fresh": {"keys": [5, 9], "seen": [1, 1], "copies": [2, 3], "counted": [1, 0]},
            "dup_batches": 1, "batches": 6, "batch_index": 6, "next_rep": 0, "reps": 0, "amp_scaler": {"s": 2.0}},
           {"counters": {"fresh": 7, "trained": 13, "samples": 13, "steps": 6, "wait_s": 0.5, "step_s": 2.5,
                         "extra": 0},
            "fresh": {"keys": [5, 9], "seen": [1, 1], "copies": [2, 3], "counted": [0, 1]},
            "dup_batches": 0, "batches": 6, "batch_index": 6, "next_rep": 0, "reps": 0, "amp_scaler": {"s": 2.0}}]
    for readers in ([True], [True, True, True], [True, False, True, False]):
        new = reshard_rank_states(old, readers)
        assert len(new) == len(readers)
        for f in ("fresh", "trained", "samples", "extra", "wait_s", "step_s"):
            assert sum(p["counters"][f] for p in new) == sum(p["counters"][f] for p in old)
        assert sum(p["batches"] for p in new) == 12 and sum(p["dup_batches"] for p in new) == 1
        assert {p["counters"]["steps"] for p in new} == {6} and {p["batch_index"] for p in new} == {6}
        assert new[0]["fresh"] == {"keys": [9], "seen": [2], "copies": [3], "counted": [1]}  # 5: all copies seen
        for r, reads in enumerate(readers[1:], start=1):
            assert new[r]["fresh"] == ({"keys": [9], "seen": [0], "copies": [3], "counted": [0]} if reads else
                                       {"keys": [], "seen": [], "copies": [], "counted": []})
        assert FreshTracker.from_state(new[0]["fresh"]).observe(np.array([0]), np.array([0]), np.array([1])) == 1


def test_a_batch_cut_short_or_ranks_out_of_step_are_refused():
    part = LoopState(counters=Counters(steps=4)).to_checkpoint()[1]
    with pytest.raises(ValueError, match=r"batch-echo repeats short on rank\(s\) \[1\]"):
        reshard_rank_states([part, {**part, "next_rep": 1, "reps": 2}], [True])
    other = LoopState(counters=Counters(steps=5)).to_checkpoint()[1]
    with pytest.raises(ValueError, match=r"disagree on the step count \(\[4, 5\]\)"):
        reshard_rank_states([part, other], [True, True])


def test_pending_rows_are_dealt_to_the_reading_ranks_each_once():
    pools = [{"sample_id": np.arange(0, 5), "epoch": np.zeros(5, np.int64)}, None,
             {"sample_id": np.arange(5, 12), "epoch": np.ones(7, np.int64)}]
    for readers in ([True], [True, True], [True, False, True, True], [True] * 20):
        out = split_rows(pools, readers)
        got = np.concatenate([p["sample_id"] for p in out if p is not None])
        assert np.array_equal(np.sort(got), np.arange(12))
        sizes = [len(p["sample_id"]) for r, p in enumerate(out) if p is not None]
        assert max(sizes) - min(sizes) <= 1 and all(p is None for r, p in enumerate(out) if not readers[r])
    assert split_rows([None, None], [True, True]) == [None, None]


def test_the_schedule_follows_the_data_across_a_change_of_worker_count():
    # 2 workers: 5 steps an epoch; at step 10 (2 epochs) resumed with 1 worker: 10 steps an epoch
    assert schedule_epochs(10, [0, 0.0], 5) == 2.0
    since = [10, schedule_epochs(10, [0, 0.0], 5)]
    assert schedule_epochs(10, since, 10) == 2.0 and schedule_epochs(25, since, 10) == 3.5
    # and back to 4 workers (3 steps an epoch) at step 30
    again = [30, schedule_epochs(30, since, 10)]
    assert again == [30, 4.0] and schedule_epochs(33, again, 3) == 5.0


def test_a_checkpoint_of_an_earlier_version_has_no_schedule_start():
    run, rank = LoopState().to_checkpoint()
    assert run["lr_from"] == [0, 0.0]
    del run["lr_from"]
    assert LoopState.from_checkpoint(run, rank).lr_from == [0, 0.0]
    del run["best"]
    with pytest.raises(KeyError, match="'best'"):
        LoopState.from_checkpoint(run, rank)



class FolderCheckpoint:
    """A checkpoint folder as Ray Train's Checkpoint hands it to a worker (as_directory)."""

    def __init__(self, path):
        self.path = str(path)

    @contextlib.contextmanager
    def as_directory(self):
        yield self.path


def written_by_two(tmp_path, pools):
    """A checkpoint folder of a 2-worker run: both ranks' files, as Ray Train merges them."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    run_part = LoopState(evals=2, lr_from=[0, 0.0]).to_checkpoint()[0]
    meta = CheckpointMeta(evals=2, steps=8, first_open_pass=1, world_size=2, state=run_part)
    for rank, (fresh, pool) in enumerate(zip((5, 4), pools, strict=True)):
        state = LoopState(counters=Counters(fresh=fresh, trained=2 * fresh, steps=8), batches=8, batch_index=8)
        local = checkpoint.write(rank, model, opt, meta if rank == 0 else None, state.to_checkpoint()[1],
                                 {1: np.sort(row_keys(np.array([rank, 10 + rank]), np.zeros(2, np.int64)))}, pool)
        for f in local.iterdir():
            shutil.move(str(f), folder / f.name)
        local.rmdir()
    return FolderCheckpoint(folder), model, opt


@pytest.mark.parametrize("world", [1, 2, 3])
def test_a_checkpoint_of_two_workers_restores_into_another_count(tmp_path, world):
    pools = [{"sample_id": np.arange(3), "echo_copy": np.zeros(3, np.int64)}, None]
    ckpt, model, opt = written_by_two(tmp_path, pools)
    got = [checkpoint.restore(ckpt, r, world, model, opt, [True] * world) for r in range(world)]
    if world == 2:  # the same count: each rank its own part, as written
        assert [g.rank["counters"]["fresh"] for g in got] == [5, 4] and got[1].pending is None
    assert sum(g.rank["counters"]["fresh"] for g in got) == 9 and sum(g.rank["batches"] for g in got) == 16
    assert {g.rank["counters"]["steps"] for g in got} == {8} and got[0].meta.world_size == 2
    assert sorted(np.concatenate([g.pending["sample_id"] for g in got if g.pending is not None])) == [0, 1, 2]
    assert list(got[0].consumed) == [1] and len(got[0].consumed[1]) == 4  # every rank's keys, on rank 0
    assert all(g.consumed == {} for g in got[1:])
    state = LoopState.from_checkpoint(got[0].meta.state, got[0].rank)
    assert state.counters.fresh == (5 if world == 2 else 9) and state.lr_from == [0, 0.0]


def test_a_checkpoint_missing_a_rank_is_refused_naming_it(tmp_path):
    ckpt, model, opt = written_by_two(tmp_path, [None, None])
    (tmp_path / "ckpt" / "rank_1.json").unlink()
    with pytest.raises(RuntimeError, match=r"lacks the state of rank\(s\) \[1\] of its 2"):
        checkpoint.restore(ckpt, 0, 1, model, opt)


class Crash(RuntimeError):
    pass


class SaveThenCrash:
    """Keeps what a rank checkpoints after evaluation 1, then fails as a killed driver's worker."""

    def __init__(self):
        self.loop, self.saved = None, None

    def due(self, evals):
        return evals == 1

    def save(self, **kw):
        keep = {k: v for k, v in kw.items() if k not in ("model", "opt")}
        self.saved = {**json.loads(json.dumps({k: keep[k] for k in ("loop_state", "rank_state")})),
                      "steps": kw["steps"], "evals": kw["evals"], "history": kw["history"], "pending": kw["pending"],
                      "model": copy.deepcopy(self.loop.model.state_dict()),
                      "opt": copy.deepcopy(self.loop.opt.state_dict()), "consumed": self.loop.consumed.keep_from(0)}
        raise Crash


def test_the_worker_loop_of_one_worker_goes_on_from_a_checkpoint_of_two():
    base = ["train.target=null", "audit.enabled=true", "source.limit=192", "train.max_epochs=2",
            "train.batch_size=16", "model.width=8", "echo.stage=before_augment", "echo.factor=2"]
    two, one = load_config(None, [*base, "scaling.num_workers=2"]), load_config(None, base)
    idx = index_source(two.source)
    blocks = list(preprocessed_blocks(two, idx))
    rows = {k: np.concatenate([b[k] for b in blocks]) for k in blocks[0]}
    share, comm, col = len(rows["sample_id"]) // 2, ThreadComm(2), LocalCollector()
    savers = [SaveThenCrash(), SaveThenCrash()]

    def rank(r):
        mine = {k: v[r * share : (r + 1) * share] for k, v in rows.items()}
        savers[r].loop = local_loop(two, idx, col, comm.for_rank(r), r, 2, checkpointer=savers[r])
        with pytest.raises(Crash):
            savers[r].loop.run(shuffled_batches([{k: v[i : i + 64] for k, v in mine.items()}
                                                 for i in range(0, share, 64)], 16, 64, r))

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    s0, s1 = (s.saved for s in savers)
    consumed = {e: np.union1d(s0["consumed"].get(e, []), s1["consumed"].get(e, [])).astype(np.int64)
                for e in set(s0["consumed"]) | set(s1["consumed"])}
    meta = CheckpointMeta(evals=s0["evals"], steps=s0["steps"], first_open_pass=0, world_size=2,
                          state=s0["loop_state"], history=s0["history"])
    restored = Restored(meta, reshard_rank_states([s0["rank_state"], s1["rank_state"]], [True])[0], consumed,
                        split_rows([s0["pending"], s1["pending"]], [True])[0])
    loop = local_loop(one, idx, col)
    loop.model.load_state_dict(s0["model"])
    loop.opt.load_state_dict(s0["opt"])
    final = loop.run(shuffled_batches(preprocessed_blocks(one, idx, 0, consumed), 16, 64, 9), restored)

    assert loop.state.lr_from == [s0["steps"], s0["steps"] / steps_per_data_epoch(two, 192, 2)]
    audit = col.audit_columns()
    trained = list(zip(audit["epoch"].tolist(), audit["sample_id"].tolist(), audit["view"].tolist(), strict=True))
    assert len(trained) == len(set(trained)) == final["trained_examples"] == 2 * 2 * 192  # each copy once
    assert final["fresh_examples"] == len({(e, i) for e, i, _ in trained}) == 2 * 192
    assert set(audit["worker"][audit["step"] < s0["steps"]].tolist()) == {0, 1}
    assert final["steps"] == s0["steps"] + int((audit["step"] >= s0["steps"]).sum()) // 16
