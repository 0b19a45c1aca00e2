"""Ray Train side: models, optimisation, the per-worker loop, the trainer adapter.

Calling the package, `echoray.train(pipeline, overrides=..., out=...)`, runs one training
run through the Python API (echoray/api.py train; see callable_package.py)."""

from echoray.callable_package import make_callable

make_callable(__name__, "train")
