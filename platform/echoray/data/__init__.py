"""Ray Data side of the pipeline: sources, decode/augment ops, echo, the builder.

The public building blocks (a stable API for your own Ray programs; docstrings there):

    echo_dataset, echo_batch, echo_batches, expected_copies, repeat_epochs,
    augment_images                                                            (data/blocks.py)
    SourceIndex, SourceError, split_holdout                                   (a reader's index)
    uniform, mix                                                              (keyed randomness)

Imported on first use: `import echoray.data` imports neither Ray nor torch.
"""

from __future__ import annotations

_PUBLIC = {
    "echo_dataset": "echoray.data.blocks", "echo_batch": "echoray.data.blocks", "echo_batches": "echoray.data.blocks",
    "expected_copies": "echoray.data.blocks", "repeat_epochs": "echoray.data.blocks",
    "augment_images": "echoray.data.blocks",
    "SourceIndex": "echoray.data.sources.base", "SourceError": "echoray.data.sources.base",
    "split_holdout": "echoray.data.plan", "uniform": "echoray.seeds", "mix": "echoray.seeds",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        import importlib

        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'echoray.data' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(__all__) | set(globals()))
