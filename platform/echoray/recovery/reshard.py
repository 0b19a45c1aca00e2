"""Elastic resume: a checkpoint written by W workers continued by N (`echoray train --resume
RUN --set scaling.num_workers=N`, or an elastic worker group, scaling.num_workers [min, max],
that Ray Train restarts with another size). Pure Python/numpy, no Ray, no torch.

What already depends on no worker count, so needs nothing here:
- the read plan: every epoch's order is a function of (seed, epoch) (data/plan.py);
- the replay: the rows already consumed are the union over ranks of consumed_<r>.npz,
  dropped by the preprocessing actor before the stream is split among the workers
  (accounting/consumed.py), so the N new workers share exactly the rows W left;
- when an evaluation (and a checkpoint) falls: at the global fresh count
  (worker/link.py FreshClock).

What is per rank, and is merged here (`reshard_rank_states`), from the W rank_<r>.json
parts (accounting/loop_state.py, scope "rank") into N:
- the counters that are sums over ranks (fresh, trained, samples, batches, waits...)
  go to the new rank 0, the others start at 0: every global sum stays the same;
- the optimizer step count is the same on every rank (DDP steps in lockstep): kept;
- the fresh tracker's samples in flight (accounting/fresh.py): one table, as
  `FreshTracker.reconcile` leaves it: the new rank 0 owns every open sample with all
  copies seen so far, every other reading rank keeps it uncounted, so a copy that
  lands anywhere is counted once;
- consumption echo's untrained rows (a checkpoint's pending pool) are dealt out to the
  new reading ranks (`split_rows`).
A batch whose batch-echo repeats a checkpoint cut short cannot be split among other
workers: such a checkpoint is refused (ValueError naming it). Checkpoints are taken after
a batch's last repeat (train/loop.py), so none is written today.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SUMMED = ("fresh", "trained", "samples", "wait_s", "step_s", "extra")  # Counters fields summed over ranks
SUMMED_RANK = ("dup_batches", "batches")  # LoopState rank fields summed over ranks
SHARED_RANK = ("batch_index", "amp_scaler")  # the same on every rank (lockstep, all-reduced gradients)


def merge_fresh_tables(tables: list[dict[str, list[int]]]) -> dict[int, list[int]]:
    """FreshTracker states of all old ranks -> {key: [copies seen, copies, counted]} of the
    samples still open: seen summed, copies the largest, counted on any rank."""
    seen: dict[int, int] = {}
    copies: dict[int, int] = {}
    counted: dict[int, int] = {}
    for t in tables:
        for k, s, c, f in zip(t["keys"], t["seen"], t["copies"], t["counted"], strict=True):
            k = int(k)
            seen[k] = seen.get(k, 0) + int(s)
            copies[k] = max(copies.get(k, 0), int(c))
            counted[k] = max(counted.get(k, 0), int(f))
    return {k: [seen[k], copies[k], counted[k]] for k in seen if seen[k] < copies[k]}


def _table_state(table: dict[int, list[int]]) -> dict[str, list[int]]:
    keys = list(table)
    return {"keys": keys, "seen": [table[k][0] for k in keys], "copies": [table[k][1] for k in keys],
            "counted": [table[k][2] for k in keys]}


def reshard_rank_states(states: list[dict[str, Any]], readers: list[bool]) -> list[dict[str, Any]]:
    """The rank parts of W old ranks (rank order) as those of N = len(readers) new ranks;
    readers[r]: whether new rank r reads the stream (train/groups.py RankLayout.reads; rank
    0 always does). Every sum over ranks is kept (see the module docstring)."""
    if not states or not readers or not readers[0]:
        raise ValueError("resharding needs the old ranks' states and a reading new rank 0")
    cut = [r for r, s in enumerate(states) if s.get("reps", 0)]
    if cut:
        raise ValueError(f"the checkpoint cut a batch's batch-echo repeats short on rank(s) {cut}; "
                         "it resumes only with the number of workers that wrote it")
    steps = {int(s["counters"]["steps"]) for s in states}
    if len(steps) != 1:
        raise ValueError(f"the checkpoint's ranks disagree on the step count ({sorted(steps)})")
    merged = merge_fresh_tables([s["fresh"] for s in states])
    open_uncounted = {k: [0, v[1], 0] for k, v in merged.items()}
    out = []
    for r, reads in enumerate(readers):
        first = r == 0
        counters = {**states[0]["counters"], **{f: (sum(s["counters"][f] for s in states) if first else 0)
                                               for f in SUMMED}}
        counters["wait_s"], counters["step_s"] = float(counters["wait_s"]), float(counters["step_s"])
        part = {**states[0], "counters": counters, "next_rep": 0, "reps": 0,
                **{f: (sum(int(s[f]) for s in states) if first else 0) for f in SUMMED_RANK},
                **{f: states[0][f] for f in SHARED_RANK if f in states[0]}}
        part["fresh"] = _table_state(merged if first else open_uncounted if reads else {})
        out.append(part)
    return out


def split_rows(parts: list[dict[str, np.ndarray] | None], readers: list[bool]) -> list[dict[str, np.ndarray] | None]:
    """Rows the old ranks held untrained (their checkpoint's pending pool), in old-rank order,
    dealt out in near-equal contiguous runs to the new reading ranks; None where a rank gets none."""
    kept = [p for p in parts if p is not None and len(p["sample_id"])]
    out: list[dict[str, np.ndarray] | None] = [None] * len(readers)
    if not kept:
        return out
    rows = {k: np.concatenate([p[k] for p in kept]) for k in kept[0]}
    takers = [r for r, reads in enumerate(readers) if reads]
    for r, at in zip(takers, np.array_split(np.arange(len(rows["sample_id"])), len(takers)), strict=True):
        if len(at):
            out[r] = {k: v[at] for k, v in rows.items()}
    return out
