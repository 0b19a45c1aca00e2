"""Quasi-random search on Ray Tune: searcher, trials, MLflow runs, studies and reports.

A search from Python: `echoray.api.tune`.

Public building block: `QuasiRandomSearcher` (tune/searcher.py), a Ray Tune Searcher for
a plain `tune.Tuner`: `QuasiRandomSearcher.from_space({...}, trials=8)`. Imported on first use.
"""

__all__ = ["QuasiRandomSearcher"]


def __getattr__(name: str):
    if name == "QuasiRandomSearcher":
        from echoray.tune.searcher import QuasiRandomSearcher

        return QuasiRandomSearcher
    raise AttributeError(f"module 'echoray.tune' has no attribute {name!r}")

