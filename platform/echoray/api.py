"""The Python API: what `echoray train | tune | study` do, for notebooks and scripts.

    from echoray.api import train
    summary = train("pipelines/digits.yaml", overrides={"echo.factor": 2})
    summary["fresh_examples_to_target"]

The same validation as the CLI, raising instead of exiting: ConfigError or SourceError
(the CLI's exit 2: bad pipeline, key, value, dataset, run folder; nothing was started),
TrackingError, StallError, DataError and any runtime failure (exit 1), KeyboardInterrupt
(130). Ray is left as found: a local Ray started by a call is shut down at its end;
call `ray.init()` first to keep one up between calls (each start costs about 30 s here).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from echoray.config import PipelineConfig
from echoray.config_load import ConfigError
from echoray.config_load import load_config as _load

Overrides = Mapping[str, Any] | Sequence[str] | None


def _assignments(overrides: Overrides) -> list[str]:
    """`{"echo.factor": 2}` (Python values) or `["echo.factor=2"]` (`--set` text) -> `--set` text.
    A value is written as JSON, which YAML 1.2 reads back as the same value."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        raise ConfigError(f"overrides: a mapping or a list of 'key.path=value', got the string {overrides!r}")
    if isinstance(overrides, Mapping):
        return [f"{key}={json.dumps(value, default=str)}" for key, value in overrides.items()]
    return [str(item) for item in overrides]


def load_config(pipeline: str | Path | None = None, overrides: Overrides = None) -> PipelineConfig:
    """The validated config of a pipeline YAML (None: the embedded digits default) with overrides."""
    return _load(pipeline, _assignments(overrides))


def _no_changes_on_resume(resume, **given) -> None:
    extra = [name for name, value in given.items() if value]
    if resume and extra:
        raise ConfigError(f"resume continues a run as it was started: drop {', '.join(extra)}")


def train(pipeline: str | Path | None = None, overrides: Overrides = None, out: str | Path | None = None, *,
          resume: str | Path | None = None, dataset=None, id_column: str | None = None,
          image_column: str = "image", label_column: str = "label") -> dict[str, Any]:
    """`echoray train`: one run to its end; returns its summary (summary.json's contents).

    dataset: a ray.data.Dataset of uint8 images and integer labels (image_column,
    label_column) as the source, in place of the pipeline's (data/sources/dataset.py): sample
    ids from id_column, or the row positions; it is materialised on the driver first."""
    t0 = time.time()
    # overrides on a resume: only what a resume may change (recovery/resume.py CHANGEABLE_ON_RESUME)
    _no_changes_on_resume(resume, pipeline=pipeline, out=out, dataset=dataset is not None)
    if resume:
        from echoray.recovery.resume import open_run

        cfg, run = open_run(str(resume), _assignments(overrides))
    elif dataset is not None:
        cfg, run = _dataset_config(pipeline, overrides, dataset, id_column, image_column, label_column), None
    else:
        cfg, run = load_config(pipeline, overrides), None

    def go() -> dict[str, Any]:
        from echoray.messages import print_summary
        from echoray.run import train as run_train

        summary = run_train(cfg, str(pipeline or "embedded:digits"), str(out) if out else None, t0, resume=run)
        print_summary(summary)
        return summary

    return _with_ray(go)


def _dataset_config(pipeline, overrides: Overrides, dataset, id_column, image_column, label_column) -> PipelineConfig:
    """The pipeline with the Dataset as its source (registered in this process)."""
    from echoray.data.sources.dataset import READER, register

    cfg = load_config(pipeline, overrides)
    token = register(dataset, image_column=image_column, label_column=label_column, id_column=id_column)
    source = cfg.source.model_dump() | {"kind": READER, "path": None, "options": {"dataset": token}}
    return cfg.model_copy(update={"source": type(cfg.source).model_validate(source)})


def tune(pipeline: str | Path | None = None, overrides: Overrides = None, *, trials: int | None = None,
         repeats: int | None = None, out: str | Path | None = None,
         resume: str | Path | None = None) -> dict[str, Any]:
    """`echoray tune`: the repeated quasi-random search of the pipeline's search.space."""
    t0 = time.time()
    cfg = _search_config("tune", pipeline, overrides, resume, trials=trials, repeats=repeats, out=out)

    def go() -> dict[str, Any]:
        from echoray.tune.search_run import run_search
        from echoray.tune.summary_text import print_search

        summary = run_search(cfg, str(pipeline) if pipeline else None, str(out) if out else None, t0,
                             trials=trials, repeats=repeats, resume=str(resume) if resume else None)
        print_search(summary)
        return summary

    return _with_ray(go)


def study(pipeline: str | Path | None = None, out: str | Path | None = None, *, variants: str | Sequence[str] | None = None,
          overrides: Overrides = None, trials: int | None = None, repeats: int | None = None,
          resume: str | Path | None = None) -> dict[str, Any]:
    """`echoray study`: the search for each variant (e.g. "baseline,before_augment:2"), then the report."""
    t0 = time.time()
    cfg = _search_config("study", pipeline, overrides, resume, trials=trials, repeats=repeats, out=out)
    names = [variants] if isinstance(variants, str) else list(variants) if variants else None

    def go() -> dict[str, Any]:
        from echoray.tune.study import run_study

        return run_study(cfg, str(pipeline) if pipeline else None, names, str(out) if out else None, t0,
                         trials=trials, repeats=repeats, resume=str(resume) if resume else None)

    return _with_ray(go)


def _search_config(command: str, pipeline, overrides: Overrides, resume, **given) -> PipelineConfig | None:
    """The CLI's checks for tune and study (cli.py main), raising ConfigError."""
    if bool(pipeline) == bool(resume):
        raise ConfigError(f"echoray {command}: give a pipeline or resume (exactly one)")
    for name in ("trials", "repeats"):
        value = given[name]
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ConfigError(f"{name}: expected a positive integer, got {value!r}")
    _no_changes_on_resume(resume, overrides=overrides, **given)
    return None if resume else load_config(pipeline, overrides)


def _with_ray(go):
    """Run with the CLI's Ray settings; shut down a local Ray this call started."""
    import ray

    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    was_up = ray.is_initialized()
    try:
        return go()
    finally:
        if not was_up and ray.is_initialized():
            ray.shutdown()
