"""What an epoch is, wherever echoray says the word: one pass over the training set's
fresh examples. Echo copies, batch-augmentation views and the optimizer steps they take
do not make an epoch longer: an epoch is `n_train` fresh examples (distinct (read pass,
sample) trained, accounting/fresh.py), however many rows or steps they took, with any echo
factor, `auto` included. A run that stops inside a pass has trained a fractional number
of epochs (the stream's last, partial batch is not trained, so a whole run reads a hair
under `train.max_epochs`).

An evaluation is a point where the held-out split is scored: `train.evals_per_epoch` of
them per epoch, evenly spaced in fresh examples (worker/link.py FreshClock), and
one where the stream ends. Records, lines and MLflow number them as evaluations and say
at which (fractional) epoch they fell. Pure; no echoray imports.
"""

from __future__ import annotations

EPOCH_DECIMALS = 4  # summary.json, records, MLflow: 1/10,000 of a pass


def epochs_of(fresh_examples: int, n_train: int) -> float:
    """Epochs (passes over the n_train training examples) that `fresh_examples` make,
    rounded to EPOCH_DECIMALS."""
    if n_train <= 0:
        raise ValueError(f"an epoch needs a training set: n_train={n_train}")
    return round(fresh_examples / n_train, EPOCH_DECIMALS)


def evaluation_point(index: int, n_train: int, per_epoch: int) -> int:
    """The fresh-example count at which evaluation `index` (1-based) falls, with
    `per_epoch` evaluations per epoch: ceil(index * n_train / per_epoch); the first step
    whose global fresh count reaches it evaluates."""
    return -(-index * n_train // per_epoch)


def epoch_end(fresh_examples: int, n_train: int, max_epochs: int | None = None) -> int:
    """The fresh-example count at which the epoch that `fresh_examples` is in ends (at a
    pass's exact end, the next one's), capped at the run's last (train.max_epochs)."""
    passes = fresh_examples // n_train + 1
    return n_train * (passes if max_epochs is None else min(passes, max_epochs))
