"""echoray: data echoing and batch augmentation on Ray.

Python API (see api.py and docs/reference/python-api.md):

    from echoray.api import train
    summary = train("pipelines/digits.yaml", overrides={"echo.factor": 2})

The names are imported on first use, so `import echoray` stays cheap (no Ray, torch
or MLflow import until a run starts), in the CLI and in every Ray worker.
"""

__version__ = "0.1.0"

# `echoray.train` and `echoray.tune` are subpackages; the functions are echoray.api's.
_API = {
    "load_config": "echoray.api",
    "ConfigError": "echoray.config_load", "SourceError": "echoray.data.sources",
    "TrackingError": "echoray.tracking", "StallError": "echoray.driver.monitor",
    "DataError": "echoray.driver.monitor",
}
__all__ = [*_API, "__version__"]


def __getattr__(name: str):
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'echoray' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
