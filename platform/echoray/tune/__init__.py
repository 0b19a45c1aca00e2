"""Quasi-random search on Ray Tune: searcher, trials, MLflow runs, studies and reports.

Calling the package, `echoray.tune(pipeline, trials=..., repeats=...)`, runs a search
through the Python API (echoray/api.py tune; see callable_package.py)."""

from echoray.callable_package import make_callable

make_callable(__name__, "tune")
