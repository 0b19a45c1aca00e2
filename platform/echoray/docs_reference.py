"""The generated reference pages: every pipeline config key (from the pydantic models in
config.py: type, default, allowed values, the field's description) and every CLI command
and option (from cli.build_parser()).

`python -m echoray.docs_reference DIR` writes DIR/config.md and DIR/cli.md; the docs
site's hook (docs/hooks.py) does the same into docs/reference/ before every build. The
pages are committed (the README and docs link them in a fresh clone); a unit test keeps
them equal to what this module writes. `missing_descriptions()` lists the keys whose field has
no description (a unit test keeps it empty). Imports nothing heavier than pydantic.
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from echoray.config import PipelineConfig


@dataclass
class Key:
    """One row of the config reference."""

    key: str
    type: str
    default: str
    allowed: str
    description: str | None
    section: bool = False


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The config models an annotation holds (a section, list[Model], dict[str, Model])."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is Literal:
        return "str" if all(isinstance(a, str) for a in typing.get_args(annotation)) else "literal"
    if origin in (list, tuple, dict):
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in typing.get_args(annotation))}]"
    if annotation is type(None):
        return "null"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


def _constraints(metadata: list) -> list[str]:
    out = []
    for m in metadata:
        if isinstance(m, FieldInfo):  # Annotated[int, Field(ge=1)] inside a union
            out.extend(_constraints(m.metadata))
            continue
        for attr, op in _BOUNDS:
            value = getattr(m, attr, None)
            if value is not None:
                out.append(f"{op} {value:g}" if isinstance(value, (int, float)) else f"{op} {value}")
    return out


def _allowed(annotation: Any, info: FieldInfo | None = None) -> str:
    """Literal choices, numeric bounds and null, as one short phrase."""
    parts: list[str] = []

    def walk(a: Any) -> None:
        origin = typing.get_origin(a)
        if origin is typing.Annotated:
            parts.extend(_constraints(list(a.__metadata__)))
            walk(typing.get_args(a)[0])
        elif origin in (Union, types.UnionType):
            for arg in typing.get_args(a):
                walk(arg)
        elif origin is Literal:
            parts.extend(f"`{v}`" for v in typing.get_args(a))
        elif a is type(None):
            parts.append("`null`")
        elif a is bool:
            parts.extend(["`true`", "`false`"])

    walk(annotation)
    if info is not None:
        parts[:0] = _constraints(info.metadata)
    seen: list[str] = []
    for p in parts:
        if p not in seen:
            seen.append(p)
    return ", ".join(seen)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_defaults=True)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _yaml(value: Any) -> str:
    value = _plain(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple, dict)):
        import json

        return json.dumps(value, default=str)
    return str(value)


def _field_default(info: FieldInfo) -> Any:
    if info.default is not PydanticUndefined:
        return info.default
    if info.default_factory is not None:
        return info.default_factory()
    return PydanticUndefined


def config_keys(model: type[BaseModel] = PipelineConfig, prefix: str = "") -> Iterator[Key]:
    """Every key of the config tree: a model's values in field order, then its sections,
    each heading its own keys; the models of list or dict fields (augment ops, search
    dimensions) follow their field as `key[].x` and `key.<key>.x`."""
    def is_section(info: FieldInfo) -> bool:
        return isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)

    fields = model.model_fields.items()
    for name, info in [*((n, i) for n, i in fields if not is_section(i)), *((n, i) for n, i in fields if is_section(i))]:
        key = f"{prefix}{name}"
        ann = info.annotation
        default = _field_default(info)
        if is_section(info):
            yield Key(key, "section", "", "", info.description, section=True)
            yield from config_keys(ann, key + ".")
            continue
        shown = "(required)" if default is PydanticUndefined else f"`{_yaml(default)}`"
        yield Key(key, _type_name(ann), shown, _allowed(ann, info), info.description)
        for sub in _models_in(ann):
            origin = typing.get_origin(ann)
            inner = f"{key}[]." if origin is list else f"{key}.<key>."
            yield from config_keys(sub, inner)


def missing_descriptions() -> list[str]:
    """Config keys whose field has no description (the reference would show a hole)."""
    return [k.key for k in config_keys() if not (k.description or "").strip()]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def config_markdown() -> str:
    lines = [
        "# Config reference",
        "",
        "<!-- Generated by platform/echoray/docs_reference.py from platform/echoray/config.py; "
        "edit the field descriptions there. -->",
        "",
        "Every key of a pipeline YAML, with its type, default (the embedded digits pipeline), "
        "allowed values and meaning. Set any of them on the command line with "
        "`--set key.path=value` (values parsed as YAML). Unknown keys and bad values are errors "
        "naming the key (exit 2).",
        "",
    ]
    table_open = False
    for k in config_keys():
        if k.section:
            depth = k.key.count(".") + k.key.count("[]") + k.key.count("<key>")
            lines += ["", f"{'#' * min(2 + depth, 4)} `{k.key}`", "", k.description or "", "",
                      "| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
            table_open = True
            continue
        if not table_open:
            lines += ["## Top level", "", "| key | type | default | allowed | meaning |", "|---|---|---|---|---|"]
            table_open = True
        lines.append(f"| `{k.key}` | {_cell(k.type)} | {_cell(k.default)} | {_cell(k.allowed)} | "
                     f"{_cell(k.description or '')} |")
    return "\n".join(_drop_empty_tables(lines)) + "\n"


def _drop_empty_tables(lines: list[str]) -> list[str]:
    """A section holding only sections keeps its heading, not an empty table."""
    out: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("| key |") and (i + 2 >= len(lines) or not lines[i + 2].startswith("| `")):
            continue
        if line == "|---|---|---|---|---|" and out and not out[-1].startswith("| key |"):
            continue
        out.append(line)
    return out


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {a.dest: a.help or "" for a in action._choices_actions}
    return {}


def cli_markdown() -> str:
    from echoray.cli import build_parser

    parser = build_parser()
    helps = _helps(parser)
    lines = [
        "# CLI reference",
        "",
        "<!-- Generated by platform/echoray/docs_reference.py from echoray.cli.build_parser(). -->",
        "",
        f"{parser.description} `python -m echoray ...` is the same command.",
        "",
        "Exit status: `0` the run completed (target reached or not), `2` invalid pipeline, key, "
        "value, dataset or a plan that cannot fit (nothing started), `1` a runtime failure, "
        "`130` Ctrl-C and `143` SIGTERM (the run, search or study can be resumed).",
    ]
    for name, sub in _subcommands(parser).items():
        usage = " ".join(sub.format_usage().removeprefix("usage: ").split())
        lines += ["", f"## `echoray {name}`", "", helps.get(name, "") + ".", "", "```", usage, "```", "",
                  "| argument | meaning | default |", "|---|---|---|"]
        for a in sub._actions:
            if isinstance(a, argparse._HelpAction):
                continue
            names = ", ".join(a.option_strings) or a.dest
            if a.option_strings and a.nargs != 0:
                names += f" {a.metavar or a.dest.upper()}"
            default = "" if a.default in (None, [], False, argparse.SUPPRESS) else f"`{a.default}`"
            lines.append(f"| `{names}` | {_cell(a.help or '')} | {default} |")
    return "\n".join(lines) + "\n"


def write(out_dir: Path) -> list[Path]:
    """Write config.md and cli.md into out_dir (only when their text changed, so a docs
    server watching the folder does not rebuild in a loop); the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in (("config.md", config_markdown()), ("cli.md", cli_markdown())):
        path = out_dir / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/reference")):
        print(p)
