"""Ray Train side: models, optimisation, the per-worker loop, the trainer adapter.
(A training run from Python: `echoray.api.train`.)

The public building blocks for a train_loop_per_worker of your own (train/blocks.py):

    FreshCounter, echo_on_consumption,
    GroupLayout, group_layout, GroupedDataConfig, member_group, group_batches,
    view_keys, sampling_seed, dropout_seed

Imported on first use (they import torch and Ray Train).
"""

_PUBLIC = ("FreshCounter", "echo_on_consumption", "GroupLayout", "group_layout", "GroupedDataConfig",
           "member_group", "group_batches", "view_keys", "sampling_seed", "dropout_seed")
__all__ = list(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        from echoray.train import blocks

        return getattr(blocks, name)
    raise AttributeError(f"module 'echoray.train' has no attribute {name!r}")

