"""A trial's side of its group's shared stream (tune/share_hub.py): attach, take, detach.

The trial reads `train.max_epochs` x (training split) rows from where it attached, the
rows a private stream of the same data seed would have held, and counts its epochs
from there (its worker loop counts steps or fresh examples, never plan epochs). The
last block is cut at that quota. A trial that starts with the stream (the first trials
of a group attach at row 0 while the window still holds it) reads exactly its private
stream's rows: plan epochs 0..max_epochs-1, each id once per epoch, with the
augmentation keys of (seed, epoch, sample_id). One that attaches later, at row s,
reads rows s..s+quota: whole plan epochs in their order, except that its first and last
"epochs" are the tail of plan epoch s // n and the head of a later one, so an id can be
seen once more or once less than max_epochs times (never twice within one plan epoch).
Why that does not bias a search: the offset comes from when the earlier trials of its
group ended, not from this trial's hyperparameters; the rows from any offset are the
same seeded random permutations as from row 0; and its fresh-example counts, audit rows
and per-trial exactness (every (epoch, sample_id) counted once, at its first copy) are
its own.

The trial echoes what it takes (consumption echo, train/consumption_echo.py) at its own
factor; without example echo it shuffles and batches here (`shuffled_batches`), as a
private stream's reader does (data/shuffle_buffer.py). Its held-out set comes decoded from the
hub too (`held_out`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from echoray.config import PipelineConfig
from echoray.data.shuffle_buffer import shuffled_batches
from echoray.echo_plan import EchoPlan, shuffle_buffer_rows
from echoray.seeds import STREAM_SAMPLER, derive_seed

Batch = dict[str, np.ndarray]


class StreamStalled(RuntimeError):
    """The shared stream gave a trial nothing for train.stall_timeout_s."""


class StreamClosed(RuntimeError):
    """The trial's hub is gone: its search ended, was interrupted or lost the hub. The trial
    did not fail by itself, so its run ends KILLED (run.py), as an interrupted run does. Seen
    in a SIGTERMed search: the driver's `finally` killed the hubs 0.3 s before Ray's SIGTERM
    reached a trial inside `hub.take`, and that run ended FAILED."""


class SharedStream:
    """One trial's attachment to a StreamHub actor (`hub`, its handle). Made by the trial
    (tune/trial.py), handed to its run through RunHooks.shared_stream, read by
    train/in_process.py; `release` (idempotent) detaches it, or tells the hub it will
    not attach."""

    WAIT_S = 2.0  # one take call waits at most this long in the hub (a thread there)

    def __init__(self, hub, trial: str):
        self.hub, self.trial = hub, trial
        self.start_row: int | None = None
        self.used = 0  # rows handed to the run
        self.released = False

    def warm(self) -> None:
        """The trial is starting: let the hub start its producer (no wait). The trial
        attaches only when its loop asks for its first batch, so a trial setting up its
        model does not hold the window back meanwhile."""
        self.hub.start.remote()

    def held_out(self, out_size: int | None):
        """The group's held-out split decoded once by the hub (data/held_out.py HeldOut),
        or None where it is too large to keep (the trial then reads its own)."""
        got = self._ask(self.hub.held_out, out_size)
        return None if got is None else self._get(got[0])

    def batches(self, cfg: PipelineConfig, group: int, n_train: int) -> Iterator[Batch]:
        """What the run's worker loop reads, as batch_stream gives it for a private stream:
        the fresh rows as taken when the worker echoes them, else shuffled exact batches."""
        plan = EchoPlan.from_config(cfg, shared_stream=True)
        blocks = self.blocks(cfg.train.max_epochs * n_train, cfg.train.stall_timeout_s)  # attaches at its first next()
        if plan.at_consumption:
            return blocks
        return shuffled_batches(blocks, cfg.train.batch_size, shuffle_buffer_rows(cfg),
                                derive_seed(cfg.seed, STREAM_SAMPLER, group))

    def blocks(self, quota_rows: int, stall_timeout_s: float) -> Iterator[Batch]:
        """The blocks from where the trial attaches, the last one cut at `quota_rows`."""
        import ray

        self.start_row = self._ask(self.hub.attach, self.trial)
        since = time.monotonic()
        while self.used < quota_rows:
            kind, refs, rows = self._ask(self.hub.take, self.trial, self.WAIT_S)
            if kind == "wait":
                if time.monotonic() - since >= stall_timeout_s:
                    raise StreamStalled(f"trial {self.trial}: its shared preprocessing stream gave no block for "
                                        f"{stall_timeout_s:g} s (train.stall_timeout_s); hub state: "
                                        f"{ray.get(self.hub.state.remote(), timeout=30)}")
                continue
            if kind == "end":
                raise RuntimeError(f"trial {self.trial}: the shared stream ended after {self.used} of its "
                                   f"{quota_rows} rows")
            since = time.monotonic()
            block = self._get(refs[0])
            need = quota_rows - self.used
            if rows > need:
                block = {k: v[:need] for k, v in block.items()}
            self.used += min(rows, need)
            yield block
        self.release("read its train.max_epochs of rows")

    def _ask(self, method, *args):
        """A call to the hub; StreamClosed where the hub is gone."""
        return self._get(method.remote(*args))

    def _get(self, ref):
        """ray.get of a hub's reply or block; StreamClosed where the hub is gone."""
        import ray
        from ray.exceptions import OwnerDiedError, RayActorError

        try:
            return ray.get(ref)
        except (RayActorError, OwnerDiedError) as exc:
            raise StreamClosed(f"trial {self.trial}: its shared preprocessing stream was closed "
                               f"(the search stopped it, or its hub died): {type(exc).__name__}") from exc

    def release(self, reason: str) -> None:
        """Detach now (or, never attached, say so): the others no longer wait for it."""
        if self.released:
            return
        self.released = True
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        try:
            if self.start_row is None:
                ray.get(self.hub.skip.remote(self.trial, reason), timeout=60)
            else:
                ray.get(self.hub.detach.remote(self.trial, self.used, reason), timeout=60)
        except (RayActorError, GetTimeoutError):
            pass  # the hub is gone (the search ended or was interrupted): nothing is held
