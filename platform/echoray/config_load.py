"""Load a pipeline YAML, apply `--set a.b=c` overrides, validate into PipelineConfig.

Every failure raises ConfigError with a message naming the offending key, so the
CLI can exit 2 before anything (Ray, MLflow, files) is started.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from echoray.config import PipelineConfig


class ConfigError(ValueError):
    """An invalid pipeline file, key or value; the message names it."""


# Keys that were removed or renamed: dotted key -> what to use instead. One row per key, sorted.
REMOVED_KEYS: dict[str, str] = {
    "scaling.in_process": "renamed scaling.local_mode: Ray Train's local mode, the same values",
}


def removed_keys_in(tree: dict[str, Any]) -> list[str]:
    """The messages for every removed key that `tree` (a pipeline mapping) sets."""
    found = []
    for key, instead in REMOVED_KEYS.items():
        node: Any = tree
        for part in key.split("."):
            node = node.get(part, _MISSING) if isinstance(node, dict) else _MISSING
        if node is not _MISSING:
            found.append(f"{key}: this key was removed ({instead})")
    return found


_MISSING = object()


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
        raise ConfigError(f"--set expects key.path=value, got {assignment!r}")
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


def _describe(err: dict[str, Any]) -> str:
    loc = ".".join(str(p) for p in err["loc"]) or "(pipeline)"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        return f"{loc}: unknown key"
    if err["type"] == "literal_error":
        return f"{loc}: {msg} (got {err.get('input')!r})"
    return f"{loc}: {msg} (got {err.get('input')!r})" if "input" in err and not isinstance(
        err.get("input"), dict
    ) else f"{loc}: {msg}"


def validate(tree: dict[str, Any], origin: str = "pipeline") -> PipelineConfig:
    if removed := removed_keys_in(tree):
        raise ConfigError(f"invalid {origin}:\n  " + "\n  ".join(removed))
    try:
        return PipelineConfig.model_validate(tree)
    except ValidationError as exc:
        lines = [_describe(e) for e in exc.errors()]
        raise ConfigError(f"invalid {origin}:\n  " + "\n  ".join(lines)) from None


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> PipelineConfig:
    """The resolved config: embedded default (path None) or the YAML, then overrides."""
    tree = read_yaml(path) if path else {}
    tree = copy.deepcopy(tree)
    for assignment in overrides or []:
        apply_override(tree, assignment)
    return validate(tree, origin=str(path) if path else "embedded default pipeline")


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
