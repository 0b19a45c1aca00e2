"""Ray Train side: models, optimisation, the per-worker loop, the trainer adapter.

Calling the package, `echoray.train(pipeline, overrides=..., out=...)`, runs one training
run through the Python API (echoray/api.py train; see callable_package.py).

The public building blocks for a train_loop_per_worker of your own (train/blocks.py):

    FreshCounter, echo_on_consumption,
    GroupLayout, group_layout, GroupedDataConfig, member_group, group_batches,
    view_keys, sampling_seed, dropout_seed

Imported on first use (they import torch and Ray Train).
"""

from echoray.callable_package import make_callable

_PUBLIC = ("FreshCounter", "echo_on_consumption", "GroupLayout", "group_layout", "GroupedDataConfig",
           "member_group", "group_batches", "view_keys", "sampling_seed", "dropout_seed")
__all__ = list(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        from echoray.train import blocks

        return getattr(blocks, name)
    raise AttributeError(f"module 'echoray.train' has no attribute {name!r}")


make_callable(__name__, "train")
