"""Pydantic's validation errors of a pipeline config, said in the user's words.

Each problem becomes one line `ORIGIN: KEY: PROBLEM`: ORIGIN is the `--set` that set the
key (`--set KEY: PROBLEM` where it names the key itself) or the pipeline file, KEY the dotted key, PROBLEM what the key accepts in words
("expected a number >= 1 or auto, got 'two'"), read from the field's type, never the
validator's own loc tags (`echo.factor.float`) or type names. An unknown key gets the
closest valid dotted keys ("did you mean echo.factor?").
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

Loc = tuple[str | int, ...]
_UNION = (Union, types.UnionType)


def _unwrap(tp: Any) -> tuple[Any, list]:
    """(type, constraint metadata) of `tp` with Annotated layers taken off."""
    meta: list = []
    while get_origin(tp) is Annotated:
        tp, *extra = get_args(tp)
        for x in extra:
            meta.extend(getattr(x, "metadata", None) or [x])
    return tp, meta


def _model_of(tp: Any) -> type[BaseModel] | None:
    """The section model `tp` is (or is Optional of), else None."""
    tp, _ = _unwrap(tp)
    if get_origin(tp) in _UNION:
        models = [m for m in (_model_of(a) for a in get_args(tp)) if m is not None]
        return models[0] if len(models) == 1 else None
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def leaf_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key of `model`'s tree that holds a value (not a section)."""
    out = []
    for name, field in model.model_fields.items():
        sub = _model_of(field.annotation)
        key = f"{prefix}{name}"
        out.extend(leaf_keys(sub, key + ".") if sub is not None else [key])
    return out


def resolve(root: type[BaseModel], loc: Loc) -> tuple[Loc, Any, list, type[BaseModel] | None]:
    """(the loc's config-key part, its field type, constraints, the model holding it).

    Walks section fields, list items and mapping values; what follows the last field
    reached (pydantic's union member tags such as `float`, `literal['auto']`) is dropped."""
    model, tp, meta, key, holder = root, None, [], (), root
    for part in loc:
        if model is not None and isinstance(part, str) and part in model.model_fields:
            field = model.model_fields[part]
            holder, tp, meta = model, field.annotation, list(field.metadata)
        elif model is None and tp is not None and _item_type(tp, part) is not None:
            tp, meta = _item_type(tp, part), []
        else:
            break  # an unknown key, or the union tags after the key
        key += (part,)
        model = _model_of(tp)
        if model is not None:
            holder, tp = model, None
    return key, tp, meta, holder


def _item_type(tp: Any, part: str | int) -> Any:
    tp, _ = _unwrap(tp)
    if get_origin(tp) in _UNION:
        found = [t for t in (_item_type(a, part) for a in get_args(tp)) if t is not None]
        return found[0] if found else None
    args = get_args(tp)
    if get_origin(tp) is list and isinstance(part, int) and args:
        return args[0]
    if get_origin(tp) is dict and isinstance(part, str) and len(args) == 2:
        return args[1]
    return None


def dotted(key: Loc) -> str:
    return ".".join(str(p) for p in key)


def _bounds(meta: list) -> str:
    b = {k: getattr(m, k) for m in meta for k in ("ge", "gt", "le", "lt") if getattr(m, k, None) is not None}
    if "ge" in b and "le" in b:
        return f" from {b['ge']:g} to {b['le']:g}"
    signs = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    return " and".join(f" {signs[k]} {v:g}" for k, v in b.items())


def forms(tp: Any, meta: list | None = None) -> list[str]:
    """The accepted forms of a field type, in words: ["a number >= 1", "auto"]."""
    tp, more = _unwrap(tp)
    meta = [*(meta or []), *more]
    origin = get_origin(tp)
    if origin in _UNION:
        return [f for a in get_args(tp) for f in forms(a, meta)]
    if origin is Literal:
        return [str(v) for v in get_args(tp)]
    if tp is type(None):
        return ["null"]
    if tp is bool:
        return ["true", "false"]
    if tp in (int, float):
        return [("an integer" if tp is int else "a number") + _bounds(meta)]
    if tp is str:
        return ["text"]
    if origin in (list, tuple):
        n = len(get_args(tp)) if origin is tuple and Ellipsis not in get_args(tp) else 0
        return [f"a list of {n} values" if n else "a list"]
    if origin is dict or _model_of(tp) is not None:
        return ["a mapping of keys to values"]
    return [getattr(tp, "__name__", str(tp))]


def one_of(words: list[str]) -> str:
    words = list(dict.fromkeys(words))
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


# What a pydantic error type says the key accepts, where the field's type is not known
# (a plugin's own Params): one form per union member.
_TYPE_FORMS = {"int_parsing": "an integer", "int_type": "an integer", "int_from_float": "an integer",
               "float_parsing": "a number", "float_type": "a number", "finite_number": "a finite number",
               "bool_parsing": "true or false", "bool_type": "true or false", "string_type": "text",
               "list_type": "a list", "invalid_key": "keys that are text", "dict_type": "a mapping of keys to values",
               "model_type": "a mapping of keys to values", "model_attributes_type": "a mapping of keys to values"}
_BOUND_TYPES = {"greater_than_equal": ("ge", ">="), "greater_than": ("gt", ">"),
                "less_than_equal": ("le", "<="), "less_than": ("lt", "<")}


def _form_of_error(err: Mapping[str, Any]) -> str:
    ctx, kind = err.get("ctx") or {}, err["type"]
    if kind in _BOUND_TYPES:
        name, sign = _BOUND_TYPES[kind]
        return f"a number {sign} {ctx.get(name)}"
    if kind == "literal_error":
        return str(ctx.get("expected", "")).replace("'", "")
    return _TYPE_FORMS.get(kind, err.get("msg", kind))


def shown(value: Any) -> str:
    """A value as the user wrote it: YAML words for scalars, never an object's repr."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, (str, int, float)):
        return repr(value)
    return "a mapping" if isinstance(value, Mapping) else "a list" if isinstance(value, (list, tuple)) else "a value"


def closest(typed: str, keys: list[str], parent: str = "", n: int = 3, cutoff: float = 0.7) -> list[str]:
    """The keys most like `typed` (within 0.1 of the best, at most `n`). A key under the
    typed key's known `parent` section is compared by its name there; any other whole,
    and where `typed` has fewer dotted parts, also by as many trailing parts
    (`batchsize` ~ `train.batch_size`)."""
    depth = typed.count(".") + 1

    def score(key: str) -> float:
        if parent and key.startswith(parent):
            pairs = [(key[len(parent):], typed[len(parent):])]
        else:
            pairs = [(key, typed), (".".join(key.split(".")[-depth:]), typed)]
        return max(difflib.SequenceMatcher(None, k, t).ratio() for k, t in pairs)

    keys = [k for k in dict.fromkeys(keys) if not typed.startswith(k + ".")]  # not the list it is in
    scored = sorted(((score(k), k) for k in keys), key=lambda sk: -sk[0])
    best = scored[0][0] if scored else 0.0
    return [k for s, k in scored[:n] if s >= max(cutoff, best - 0.1)]


def _unknown(key: Loc, err: Mapping[str, Any], holder: type[BaseModel], root: type[BaseModel],
             removed: Mapping[str, str]) -> str:
    name = dotted(key + tuple(err["loc"][len(key):len(key) + 1]))
    if name in removed:
        return f"{name}: was removed: {removed[name]}"
    typed, value = name, err.get("input")
    while isinstance(value, Mapping) and value:  # `eco: {factor: 2}`: match eco.factor
        sub, value = next(iter(value.items()))
        typed += f".{sub}"
    parent = dotted(key) + "." if key else ""
    candidates = leaf_keys(root) + ([parent + k for k in leaf_keys(holder)] if holder is not root else [])
    close = closest(typed, candidates, parent)
    hint = f"; did you mean {one_of(close)}?" if close else ""
    last = name.rsplit(".", 1)[-1]
    if ":" in last and err.get("input") is None:
        k, _, v = last.partition(":")
        hint = f"; YAML needs a space after the colon (`{k}: {v}`, not `{last}`)"
    return f"{name}: unknown key{hint}"


def describe(root: type[BaseModel], errors: list[Mapping[str, Any]],
             origin_of: Callable[[Loc, str], str], removed: Mapping[str, str] | None = None) -> list[str]:
    """One line per problem; a key's union-member errors are one line listing its forms."""
    groups: dict[Loc, list] = {}
    for err in errors:
        key, tp, meta, holder = resolve(root, tuple(err["loc"]))
        groups.setdefault(key if err["type"] != "extra_forbidden" else tuple(err["loc"]), []).append(
            (err, key, tp, meta, holder))
    lines = []
    for group in groups.values():
        err, key, tp, meta, holder = group[0]
        if err["type"] == "extra_forbidden":
            text = _unknown(key, err, holder, root, removed or {})
        else:
            text = _problem(group, key, tp, meta)
        where = tuple(err["loc"][:len(key) + 1]) if err["type"] == "extra_forbidden" else key
        lines.append(said_at(origin_of, where, text))
    return lines


def said_at(origin_of: Callable[[Loc, str], str], key: Loc, text: str) -> str:
    """`text` (a problem of `key`, starting with its name) after the origin that set the
    key, the key said once where the origin is a `--set` of that key."""
    origin, name = origin_of(key, text), dotted(key)
    same = origin == f"--set {name}" and text.startswith(name + ": ")
    return f"{origin}{text[len(name):]}" if same else f"{origin}: {text}"


def _problem(group: list, key: Loc, tp: Any, meta: list) -> str:
    err = group[0][0]
    prefix = f"{dotted(key)}: " if key else ""
    value_errors = [e for e, *_ in group if e["type"] in ("value_error", "assertion_error")]
    if value_errors:
        e = value_errors[0]
        msg = e["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
        value = e.get("input")
        if isinstance(value, (Mapping, list)) or not key:
            return prefix + msg
        return prefix + (f"{msg}, got {shown(value)}" if msg.startswith("expected") else f"{msg} (got {shown(value)})")
    if err["type"] == "missing":
        return prefix + "required"
    words = forms(tp, meta) if tp is not None else [_form_of_error(e) for e, *_ in group]
    return f"{prefix}expected {one_of(words)}, got {shown(err.get('input'))}"
