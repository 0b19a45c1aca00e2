"""Where the echo happens and what follows from it, decided once from the config.

`EchoPlan.from_config(cfg)` answers every question the pipeline asks of `echo.stage`
(which process repeats what, at which factor) as named
attributes; the rest of the code reads them instead of comparing stage names. This
module and its two stage rules (`echoes_examples`, `echoes_batches`) are the only code
that branches on a stage name. It imports nothing from echoray, so config.py, data/
and train/ can all use it without importing each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

EXAMPLE_STAGES = ("before_augment", "after_augment")


def echoes_examples(stage: str) -> bool:
    """Whether echo.stage repeats examples (before or after their augmentation)."""
    return stage in EXAMPLE_STAGES


def echoes_batches(stage: str) -> bool:
    """Whether echo.stage repeats whole batches on the worker (batch echo)."""
    return stage == "batch"


@dataclass(frozen=True)
class EchoPlan:
    """The echo decisions of one run (see the module docstring).

    Exactly one of in_actor_before_augment, in_actor_after_augment, at_consumption,
    on_batches is true when the run echoes; none is when echo.stage is none."""

    stage: str  # echo.stage, as configured (for records)
    factor: float | str  # echo.factor, as configured (a number or "auto")
    examples: bool  # the stage repeats examples (its draws decide rows per epoch)
    on_batches: bool  # the worker repeats each batch (train/consumption_echo.py BatchEchoDraws)
    # echo.factor: auto of examples made by the reading worker as it takes rows from the
    # stream (train/consumption_echo.py): after augmentation, or before one that runs on
    # the worker (or with none). Before a CPU augmentation the copies need the actor's
    # per-copy augmentation, so that case stays in the actor (its factor lags the stream).
    at_consumption: bool
    in_actor_before_augment: bool  # the preprocessing actor echoes, then augments each copy
    in_actor_after_augment: bool  # the preprocessing actor augments, then echoes
    actor_factor: float | str  # the factor the actor applies: 1.0 where it does not echo
    per_copy_augment: bool  # each echo copy gets its own augmentation key (echo precedes it)
    separate_copies: bool  # repack batches so copies of one sample rarely share one (data/batching.py)
    # under `auto` at consumption: when no fresh batch is ready, the worker
    # completes one with extra copies of samples it trained lately (train/consumption_echo.py SpareCopies).
    fills_waits: bool = False

    @property
    def schedule_factor(self) -> float:
        """The echo factor an epoch's optimizer steps are counted at for the learning-rate
        schedule ahead of the run (evaluations fall by fresh examples: echoray/epochs.py): the
        configured factor, and 1 under `auto` and without echo. So a fixed factor e stretches
        the schedule (warm-up and decay in epochs of fresh data) over e times the steps of
        e = 1; under `auto` the steps per epoch are measured as the run goes
        (schedule_follows_fresh)."""
        if self.factor == "auto" or not (self.examples or self.on_batches):
            return 1.0
        return float(self.factor)

    @property
    def schedule_follows_fresh(self) -> bool:
        """Whether the learning-rate schedule's steps per epoch are measured from the fresh
        count at each evaluation (train/schedule_position.py): under `auto`, whose factor is
        not known ahead. Counted at e = 1 instead, warm-up and decay of a run echoing 4-8x
        ended within two epochs of fresh data, and the rest trained at a learning rate of
        about 0 (docs/benchmarks/accelerator.md)."""
        return self.factor == "auto" and (self.examples or self.on_batches)

    def steps_per_shard_epoch(self, batch_size: int, num_train: int, readers: int,
                              factor: float | None = None) -> int:
        """Optimizer steps a reader takes through its shard in one data epoch (an epoch of
        fresh data) at `factor` (default schedule_factor); every rank takes as many.
        readers: workers that read disjoint shards (W in `local` mode, W/M groups in
        `grouped` mode: a group's members step together through one shard). Example echo
        makes e x num_train rows per epoch; batch echo repeats each of the fresh batches."""
        factor = self.schedule_factor if factor is None else factor
        per_step = readers * batch_size
        if self.examples:
            return max(1, math.floor(num_train * factor / per_step))
        fresh_steps = max(1, num_train // per_step)
        return max(1, round(fresh_steps * (factor if self.on_batches else 1.0)))

    @property
    def in_actor(self) -> bool:
        """Whether the preprocessing actor echoes (before or after augmentation)."""
        return self.in_actor_before_augment or self.in_actor_after_augment

    @classmethod
    def from_config(cls, cfg) -> EchoPlan:
        """The plan of a PipelineConfig."""
        return cls.from_sections(cfg.echo, cfg.preprocess.augment)

    @classmethod
    def from_sections(cls, echo, augment) -> EchoPlan:
        """The plan of an EchoConfig and an AugmentConfig (config.py's validator has no
        PipelineConfig yet)."""
        examples = echoes_examples(echo.stage)
        auto = echo.factor == "auto"
        before = echo.stage == "before_augment"
        worker_side = not before or augment.on == "worker" or not augment.ops  # copies need no actor augmentation
        at_consumption = examples and worker_side and auto
        in_actor = examples and not at_consumption
        return cls(
            stage=echo.stage, factor=echo.factor, examples=examples, on_batches=echoes_batches(echo.stage),
            at_consumption=at_consumption,
            in_actor_before_augment=in_actor and before, in_actor_after_augment=in_actor and not before,
            actor_factor=echo.factor if in_actor else 1.0, per_copy_augment=before,
            separate_copies=examples,
            fills_waits=at_consumption and auto,
        )


def shuffle_buffer_rows(cfg) -> int | None:
    """The worker's local shuffle buffer (and consumption-echo pool), at least two batches:
    with a buffer of exactly one batch, Ray Data 2.60 emitted short batches despite
    drop_last (414 of 512 rows, measured). None: echo.shuffle_buffer is 0 (no shuffle)."""
    if not cfg.echo.shuffle_buffer:
        return None
    return max(cfg.echo.shuffle_buffer, 2 * cfg.train.batch_size)


def stream_buffer_rows(cfg) -> int | None:
    """The reading worker's local shuffle of the stream's rows: shuffle_buffer_rows, except
    under `auto` at consumption, where the rows it holds are fresh and the pool after it
    (train/consumption_echo.py, shuffle_buffer_rows rows) makes the copies. There it holds
    as many samples as the fixed factor's buffer does at auto's start factor (the buffer
    over echo.max_factor, where auto starts, at least two batches), so the first batch waits for as many
    fresh rows as that factor's does. Sized as the pool, it held 256 fresh sequences
    first where e = 8's held 32 (8 copies each): on benchmarks/lm_auto_echo.py auto read
    275-378 sequences before its first step, e = 8 72-252, and took 1.46x e = 8's time to
    the target with 1.07x its training time (results/lm_auto_echo_plain.json)."""
    rows = shuffle_buffer_rows(cfg)
    plan = EchoPlan.from_config(cfg)
    if not rows or not (plan.at_consumption and plan.factor == "auto"):
        return rows
    return max(2 * cfg.train.batch_size, math.ceil(rows / max(1.0, cfg.echo.max_factor)))
