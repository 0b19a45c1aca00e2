"""Extension points by import path: `"package.module:attr"` names a user's model factory,
source reader or augmentation op in the pipeline YAML (model.name, source.kind, op).

Contract: a config value is either one of the built-in names (a tuple each section owns,
that other modules may append to) or an import path; anything else is refused naming the
key. An import path is resolved when the config is validated, on the driver before
anything starts (exit 2 on failure) and again in every process that validates the config
(so the module must be importable on every node: installed, or on PYTHONPATH, which the
Ray processes of a local cluster inherit). Failures say which key, which path and why:
the module does not import, the attribute is missing, or the object's signature does not
take the call echoray makes (inspect.signature, checked before start). No torch here.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Sequence
from typing import Any

_IMPORT_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def is_import_path(value: object) -> bool:
    """True for a string of the form "package.module:attr" (attr may be dotted: "mod:Cls.make")."""
    return isinstance(value, str) and bool(_IMPORT_PATH.match(value))


def builtin_or_path(value: object, builtins: Sequence[str]) -> str:
    """`value` when it is a built-in name or an import path; else a ValueError listing the
    built-in names and the import-path form (a pydantic field validator's message: pydantic
    puts the key before it and config_load the value after it)."""
    if isinstance(value, str) and (value in builtins or is_import_path(value)):
        return value
    names = ", ".join(repr(b) for b in builtins)
    raise ValueError(f"expected one of {names} or an import path 'package.module:name'")


def load_object(spec: str, key: str) -> Any:
    """The object an import path names; ValueError naming `key` when it cannot be had."""
    if not is_import_path(spec):
        raise ValueError(f"{key} {spec!r}: not an import path 'package.module:name'")
    module_name, attr = spec.split(":", 1)
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any failure of the user's module is reported as such
        raise ValueError(f"{key} {spec!r}: cannot import module {module_name!r} "
                         f"({type(exc).__name__}: {exc}); it must be importable on every node "
                         "(installed, or on PYTHONPATH)") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{key} {spec!r}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def check_call(fn: Callable, key: str, spec: str, what: str, /, *args: Any, **kwargs: Any) -> None:
    """ValueError naming `key` unless fn's signature accepts fn(*args, **kwargs) (not called)."""
    if not callable(fn):
        raise ValueError(f"{key} {spec!r}: {what} must be callable, got {type(fn).__name__}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin without a readable signature: the call itself will tell
    try:
        sig.bind(*args, **kwargs)
    except TypeError as exc:
        given = ", ".join([*(repr(a) for a in args), *(f"{k}=..." for k in kwargs)])
        raise ValueError(f"{key} {spec!r}: {what} cannot be called as ({given}): {exc}; "
                         f"its signature is {sig}") from None


# --- the three protocols (docstrings of echoray.train.models, echoray.data.sources, echoray.data.ops) ---

def check_model_factory(spec: str, kwargs: dict[str, Any], key: str = "model.name") -> Callable:
    """A model factory: factory(num_classes=int, input_shape=(C, H, W), **model.kwargs) -> torch.nn.Module."""
    factory = load_object(spec, key)
    check_call(factory, key, spec, "the model factory", num_classes=10, input_shape=(3, 32, 32), **kwargs)
    return factory


def check_reader_class(spec: str, key: str = "source.kind") -> type:
    """A reader class: Cls.index(cfg) -> SourceIndex (driver), Cls(idx) (every actor),
    instance.read(ids, split) -> (images uint8 N x H x W x C, labels int64)."""
    cls = load_object(spec, key)
    if not isinstance(cls, type):
        raise ValueError(f"{key} {spec!r}: a reader must be a class, got {type(cls).__name__}")
    for method in ("index", "read"):
        if not callable(getattr(cls, method, None)):
            raise ValueError(f"{key} {spec!r}: the reader class has no method {method!r} "
                             "(see echoray.data.sources: index(cfg) -> SourceIndex, read(ids, split))")
    check_call(cls.index, key, spec, "Reader.index", object())
    check_call(cls, key, spec, "the reader class", object())
    check_call(cls.read, key, spec, "Reader.read", object(), [], "train")
    return cls


def op_params(cls: type, params: dict[str, Any], key: str, spec: str) -> Any:
    """The op's own parameters object from the YAML keys: cls.Params (a pydantic model or a
    dataclass) validated, or None for an op without Params (then no keys are allowed)."""
    params_cls = getattr(cls, "Params", None)
    if params_cls is None:
        if params:
            raise ValueError(f"{key} {spec!r}: the op declares no Params, so it takes no keys "
                             f"(got {', '.join(sorted(params))})")
        return None
    if hasattr(params_cls, "model_validate"):
        from pydantic import ValidationError

        try:
            return params_cls.model_validate(params)
        except ValidationError as exc:
            lines = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"{key} {spec!r}: {lines}") from None
    import dataclasses

    if not dataclasses.is_dataclass(params_cls):
        raise ValueError(f"{key} {spec!r}: Params must be a pydantic model or a dataclass")
    try:
        return params_cls(**params)
    except TypeError as exc:
        raise ValueError(f"{key} {spec!r}: {exc}") from None


def check_op_class(spec: str, params: dict[str, Any], key: str = "preprocess.augment.ops.op") -> type:
    """An augmentation op class: Cls(params) (or Cls() without Params), a numpy
    __call__(images, keys), optionally output_shape((H, W, C)) and apply_torch(x, keys)."""
    cls = load_object(spec, key)
    if not isinstance(cls, type):
        raise ValueError(f"{key} {spec!r}: an augmentation op must be a class, got {type(cls).__name__}")
    if not any("__call__" in vars(k) for k in cls.__mro__[:-1]):
        raise ValueError(f"{key} {spec!r}: the op class defines no __call__(images, keys)")
    parsed = op_params(cls, params, key, spec)
    args = () if parsed is None else (parsed,)
    check_call(cls, key, spec, "the op class", *args)
    check_call(cls.__call__, key, spec, "the op's __call__", object(), object(), object())
    return cls
