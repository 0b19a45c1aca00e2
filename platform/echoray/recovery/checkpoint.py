"""Ray Train checkpoints of the training loop: what a restarted worker group, or
`echoray train --resume`, needs to continue with exact counters.

Every rank writes into one checkpoint (Ray Train gives all ranks the same directory
name and merges their files):

    meta.json         rank 0: epoch, steps, first open plan epoch, loop state, epoch history,
                      the live echo factor (echo.factor: auto)
    model.pt          rank 0: model and optimizer state (the LR schedule: of steps and lr_from)
    rank_<r>.json     counters, batch index, and a batch whose batch-echo repeats the epoch
                      end cut short (its arrays in pending_<r>.npz)
    rank_<r>.pt       torch RNG state
    consumed_<r>.npz  keys of the rows the rank consumed in plan epochs not yet complete
    audit_<r>.npz     audit rows since the previous checkpoint (audit.enabled)

A checkpoint written by W workers restores into N others (`echoray train --resume RUN --set
scaling.num_workers=N`, or Ray Train restarting an elastic group, scaling.num_workers [min, max],
with another size): every new rank reads all W rank_<r>.json and pending_<r>.npz and
takes its share (recovery/reshard.py); consumed_<r>.npz are a union anyway.

torch is imported inside the functions: Ray Train's controller reads the replay part
(read_replay) and should not pay for importing torch.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from echoray.records import CheckpointMeta
from echoray.recovery.reshard import reshard_rank_states, split_rows

META = "meta.json"  # records.CheckpointMeta
# Checkpoints kept (all of them with the audit on): resume reads the newest; the one before it
# stands in where the newest was cut short.
KEPT = 2


@dataclass
class Restored:
    meta: CheckpointMeta
    rank: dict[str, Any]
    consumed: dict[int, np.ndarray]  # rank 0: every rank's keys; the others: none
    pending: dict[str, np.ndarray] | None


def _unwrap(model):
    model = getattr(model, "module", model)  # DistributedDataParallel wraps the net ...
    return getattr(model, "_orig_mod", model)  # ... and torch.compile (train.compile) too


def quiet_report_log() -> None:
    """Ray Train logs a line per report (checkpoint) at INFO from a logger named after its
    file, which RunConfig(logging_config) does not reach; keep the console to our lines.
    Ray internal: the logger's name is that file's path (ray/train/v2/_internal/execution/
    context.py, `logging.getLogger(__file__)`), outside the `ray.train` logger tree."""
    try:
        from ray.train.v2._internal.execution import context

        logging.getLogger(context.__file__).setLevel(logging.WARNING)
    except ImportError:  # a Ray without that module: its lines stay
        pass


def final_weights(model) -> dict[str, Any]:
    """The model's state dict as the run ended, copied to the CPU (detached from the
    training, picklable): what rank 0 hands the driver for the MLflow model
    (tracking_model.py), whatever wraps the net (DDP, torch.compile) and wherever it trained."""
    return {k: v.detach().to("cpu", copy=True) for k, v in _unwrap(model).state_dict().items()}


def write(rank: int, model, opt, meta: CheckpointMeta | None, rank_state: dict, consumed: dict[int, np.ndarray],
          pending: dict[str, np.ndarray] | None, audit: dict[str, np.ndarray] | None = None) -> Path:
    """This rank's files in a fresh local directory (rank 0 adds model and meta)."""
    import torch

    d = Path(tempfile.mkdtemp(prefix="echoray-ckpt-"))
    if rank == 0:
        torch.save({"model": _unwrap(model).state_dict(), "optimizer": opt.state_dict()}, d / "model.pt")
        (d / META).write_text(json.dumps(meta.to_dict(), default=float))
    rng = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        rng["cuda"] = torch.cuda.get_rng_state()
    torch.save(rng, d / f"rank_{rank}.pt")
    (d / f"rank_{rank}.json").write_text(json.dumps({**rank_state, "pending": pending is not None}))
    if pending is not None:
        np.savez(d / f"pending_{rank}.npz", **pending)
    np.savez(d / f"consumed_{rank}.npz", **{f"e{e}": keys for e, keys in consumed.items()})
    if audit is not None:
        np.savez(d / f"audit_{rank}.npz", **audit)
    return d


def report(metrics: dict[str, Any], local_dir: Path) -> None:
    """Every rank calls this at the same step; Ray Train uploads and registers one checkpoint."""
    import ray.train

    try:
        ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(str(local_dir)))
    finally:
        shutil.rmtree(local_dir, ignore_errors=True)


def _consumed(d: Path) -> dict[int, np.ndarray]:
    """The union over ranks of the consumed keys, per plan epoch."""
    out: dict[int, np.ndarray] = {}
    for f in sorted(d.glob("consumed_*.npz")):
        with np.load(f) as z:
            for name in z.files:
                e = int(name[1:])
                out[e] = np.union1d(out[e], z[name]) if e in out else np.sort(z[name])
    return out


def _meta(d: Path) -> CheckpointMeta:
    """meta.json, the one place it is read (a file of any earlier version: same keys)."""
    return CheckpointMeta.from_dict(json.loads((d / META).read_text()))


def read_replay(checkpoint) -> tuple[int, dict[int, np.ndarray]]:
    """(first plan epoch to read again, rows of the open epochs already consumed)."""
    with checkpoint.as_directory() as d:
        return _meta(Path(d)).first_open_pass, _consumed(Path(d))


def read_audit(checkpoint) -> list[dict[str, np.ndarray]]:
    """The audit rows this checkpoint added (every rank's)."""
    parts = []
    with checkpoint.as_directory() as d:
        for f in sorted(Path(d).glob("audit_*.npz")):
            with np.load(f) as z:
                parts.append({k: z[k] for k in z.files})
    return parts


def read_meta(checkpoint) -> CheckpointMeta:
    with checkpoint.as_directory() as d:
        return _meta(Path(d))


def restore(checkpoint, rank: int, world: int, model, opt, readers: list[bool] | None = None) -> Restored:
    """Load model, optimizer, RNG and this rank's state from the checkpoint Ray Train handed over.

    A checkpoint written by another number of workers (an elastic resume) is resharded
    (recovery/reshard.py): `readers[r]` says whether new rank r reads the stream (default:
    all do). A rank the checkpoint had no files for keeps the RNG state setup() seeded."""
    import torch

    with checkpoint.as_directory() as tmp:
        d = Path(tmp)
        meta = _meta(d)
        states = torch.load(d / "model.pt", map_location="cpu", weights_only=True)
        _unwrap(model).load_state_dict(states["model"])
        opt.load_state_dict(states["optimizer"])
        if rank < meta.world_size:
            rng = torch.load(d / f"rank_{rank}.pt", weights_only=True)
            torch.set_rng_state(rng["torch"])
            if "cuda" in rng and torch.cuda.is_available():
                torch.cuda.set_rng_state(rng["cuda"])
        if meta.world_size == world:
            rank_state, pending = _rank_part(d, rank)
        else:
            rank_state, pending = _resharded_part(d, meta.world_size, rank, readers or [True] * world)
        consumed = _consumed(d) if rank == 0 else {}
    return Restored(meta, rank_state, consumed, pending)


def _rank_part(d: Path, rank: int) -> tuple[dict[str, Any], dict[str, np.ndarray] | None]:
    """rank_<rank>.json without its "pending" flag, and the pending rows it flags."""
    rank_state = json.loads((d / f"rank_{rank}.json").read_text())
    pending = None
    if rank_state.pop("pending"):
        with np.load(d / f"pending_{rank}.npz") as z:
            pending = {k: z[k] for k in z.files}
    return rank_state, pending


def _resharded_part(d: Path, old_world: int, rank: int,
                    readers: list[bool]) -> tuple[dict[str, Any], dict[str, np.ndarray] | None]:
    """New rank `rank`'s part of every old rank's state and pending rows (recovery/reshard.py)."""
    missing = [r for r in range(old_world) if not (d / f"rank_{r}.json").is_file()]
    if missing:
        raise RuntimeError(f"checkpoint {d} lacks the state of rank(s) {missing} of its {old_world}")
    parts = [_rank_part(d, r) for r in range(old_world)]
    states = reshard_rank_states([s for s, _ in parts], readers)
    pools = split_rows([p for _, p in parts], readers)
    return states[rank], pools[rank]
