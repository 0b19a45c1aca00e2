"""Quasi-random search on Ray Tune: searcher, trials, MLflow runs, studies and reports.

Calling the package, `echoray.tune(pipeline, trials=..., repeats=...)`, runs a search
through the Python API (echoray/api.py tune; see callable_package.py).

Public building block: `QuasiRandomSearcher` (tune/searcher.py), a Ray Tune Searcher for
a plain `tune.Tuner`: `QuasiRandomSearcher.from_space({...}, trials=8)`. Imported on first use.
"""

from echoray.callable_package import make_callable

__all__ = ["QuasiRandomSearcher"]


def __getattr__(name: str):
    if name == "QuasiRandomSearcher":
        from echoray.tune.searcher import QuasiRandomSearcher

        return QuasiRandomSearcher
    raise AttributeError(f"module 'echoray.tune' has no attribute {name!r}")


make_callable(__name__, "tune")
