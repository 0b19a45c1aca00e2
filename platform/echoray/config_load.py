"""Load a pipeline YAML, apply `--set a.b=c` overrides, validate into PipelineConfig.

Every failure raises ConfigError with a message naming the offending key, so the
CLI can exit 2 before anything (Ray, MLflow, files) is started.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from echoray.config import PipelineConfig
from echoray.config_words import Loc, describe, said_at


class ConfigError(ValueError):
    """An invalid pipeline file, key or value; the message names it."""


# Keys that were removed or renamed: dotted key -> what to use instead. One row per key, sorted.
REMOVED_KEYS: dict[str, str] = {
    "echo.fill_waits": "always on under echo.factor: auto: a worker with no fresh batch ready trains extra "
                       "copies (at most echo.max_factor per sample) instead of waiting; drop the key",
    "echo.separate_copies": "always on: batches are repacked so echoed copies of one example rarely share one; drop "
                            "the key",
    "echo.start_factor": "echo.factor: auto starts at echo.max_factor (lower the cap to start lower); drop the key",
    "preprocess.augment.ops.params": "an op by import path takes its own keys beside `op`, flat (preprocess.augment.ops: [{op: "
                                     "my_ops:Op, key: value}])",
    "preprocess.augment.ops.ratio": "random_resized_crop uses Inception's ranges (area 0.08-1, aspect 3/4-4/3); other ranges: "
                                    "an op class by import path (docs/how-to/extend.md)",
    "preprocess.augment.ops.scale": "random_resized_crop uses Inception's ranges (area 0.08-1, aspect 3/4-4/3); other ranges: "
                                    "an op class by import path (docs/how-to/extend.md)",
    "preprocess.deterministic": "Ray Data's output order is always kept, so one seed gives one batch sequence; drop the "
                                "key",
    "preprocess.head_start_pool_at": "the head start is gone with preprocess.head_start_rows: every run reads "
                                     "the preprocessing actors' stream, as Ray Train workers on a cluster do; "
                                     "drop the key",
    "preprocess.head_start_rows": "the head start is gone: every run reads the preprocessing actors' stream, "
                                  "as Ray Train workers on a cluster do; drop the key",
    "scaling.in_process": "renamed scaling.local_mode: Ray Train's local mode, the same values",
    "search.sequence": "the search always draws a scrambled Halton sequence; drop the key",
    "search.share_preprocessing": "shared preprocessing across trials is gone: it served only one-CPU-worker "
                                  "trials, never multi-worker or GPU trials on a cluster; every trial reads its "
                                  "own stream (docs/how-to/search.md)",
    "search.warm_trials": "scaling.local_mode: false (every trial a worker group); otherwise one-CPU-worker trials "
                          "train in their reused Tune trial actor",
    "source.max_rows_ahead": "read pacing is gone: Ray Data's backpressure (its object store budget) bounds "
                             "how far the actors read ahead; drop the key",
    "source.range_bytes": "a text corpus is cut into about 1,024 read units of at least 32 sequences and at most 1 MiB "
                          "(data/text/source.py unit_bytes); drop the key",
    "source.read_concurrency": "16 reads in flight per actor where source.path is a URI, else 1; a reader by import path "
                               "declares its own (SourceIndex.read_concurrency); drop the key",
    "source.remote": "emulate a slow store with the benchmarks reader, source.kind: slow_store:SlowStore "
                     "(benchmarks/slow_store.py)",
    "source.tokenizer.train_bytes": "a BPE tokenizer trains on a seeded sample of at most 64 MiB of training documents; drop "
                                    "the key",
    "storage.retry_s": "train.stall_timeout_s: reads and checkpoint writes wait out an object store outage for "
                       "half of it",
    "train.checkpoint_min_interval_s": "a checkpoint every train.checkpoint_every epochs, with no minimum interval; raise "
                                       "train.checkpoint_every for short epochs",
    "train.checkpoints_to_keep": "the last two checkpoints are kept (all of them with audit.enabled); drop the key",
}


def removed_keys_in(tree: dict[str, Any]) -> list[str]:
    """The messages for every removed key that `tree` (a pipeline mapping) sets; a key under
    a list (preprocess.augment.ops.scale) is set where any item of the list sets it."""
    return [f"{key}: this key was removed ({instead})" for key, instead in REMOVED_KEYS.items()
            if _sets(tree, key.split("."))]


def _sets(node: Any, parts: list[str]) -> bool:
    if not parts:
        return True
    if isinstance(node, list):
        return any(_sets(item, parts) for item in node)
    return isinstance(node, dict) and parts[0] in node and _sets(node[parts[0]], parts[1:])


class _Yaml12Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans: only true/false, so `on: worker` stays a key
    named "on" (YAML 1.1 would read on/off/yes/no as booleans)."""


_Yaml12Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def parse_yaml(text: str):
    return yaml.load(text, Loader=_Yaml12Loader)  # noqa: S506 - a SafeLoader subclass


def read_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"pipeline file not found: {p}")
    try:
        data = parse_yaml(p.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: invalid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: top level must be a mapping of sections, got {type(data).__name__}")
    return data


def apply_override(tree: dict[str, Any], assignment: str) -> None:
    """Apply one `a.b.c=value` (value parsed as YAML) to a nested dict in place."""
    key, sep, raw = assignment.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set takes key=value with a dotted key such as echo.factor; got {assignment!r}")
    try:
        value = parse_yaml(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {key}: cannot parse value {raw!r}: {exc}") from exc
    node = tree
    parts = key.split(".")
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"--set {key}: {'.'.join(parts[: i + 1])} is not a section")
        node = child
    node[parts[-1]] = value


def check_assignments(overrides: list[str]) -> None:
    """ConfigError for a `--set` without `=`, before any file is read."""
    for assignment in overrides:
        if "=" not in assignment:
            raise ConfigError(f"--set takes key=value; got {assignment!r}")


def _origin_of(overrides: list[str], fallback: str) -> Callable[[Loc, str], str]:
    """Which input set a key: the last `--set` on it (or on a section holding it, or a
    key its section's check names), else `fallback` (the pipeline file)."""
    sets = [tuple(a.partition("=")[0].strip().split(".")) for a in overrides]

    def origin(key: Loc, text: str) -> str:
        parts = tuple(str(p) for p in key)
        for okey in reversed(sets):
            n = min(len(okey), len(parts))
            if (parts and okey[:n] == parts[:n]) or (not parts and ".".join(okey) in text):
                return f"--set {'.'.join(okey)}"
        return fallback

    return origin


def validate(tree: dict[str, Any], origin: str = "pipeline", overrides: list[str] | None = None) -> PipelineConfig:
    """The PipelineConfig of `tree`; ConfigError with one line per problem, each naming
    the `--set` (of `overrides`) or else `origin` it came from (config_words.py)."""
    where = _origin_of(overrides or [], origin)
    if removed := removed_keys_in(tree):
        lines = [said_at(where, tuple(msg.split(":", 1)[0].split(".")), msg) for msg in removed]
        raise ConfigError(lines[0] if len(lines) == 1 else "invalid settings:\n  " + "\n  ".join(lines))
    try:
        return PipelineConfig.model_validate(tree)
    except ValidationError as exc:
        lines = describe(PipelineConfig, exc.errors(), where)
        raise ConfigError(lines[0] if len(lines) == 1 else "invalid settings:\n  " + "\n  ".join(lines)) from None


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> PipelineConfig:
    """The resolved config: embedded default (path None) or the YAML, then overrides."""
    check_assignments(overrides or [])
    tree = read_yaml(path) if path else {}
    tree = copy.deepcopy(tree)
    for assignment in overrides or []:
        apply_override(tree, assignment)
    origin = str(path) if path else "the embedded default pipeline (digits)"
    return validate(tree, origin=origin, overrides=overrides)


def flatten(cfg: PipelineConfig) -> dict[str, str]:
    """Dotted key -> string value, for MLflow params."""
    out: dict[str, str] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict) and node:
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            out[prefix] = str(node)

    walk("", cfg.model_dump(mode="json"))
    return out


def to_yaml(cfg: PipelineConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
