"""A config a user can hold in mind (issue 59): at most 90 leaf keys, counted over the
whole model: a nested section's fields, a list's or a dict's model items' fields (an
augmentation op's, a search dimension's) each count; a dict or list of scalars is one."""

import typing

from pydantic import BaseModel

from echoray.config import PipelineConfig

MAX_LEAF_KEYS = 90


def _models_in(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def leaf_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Dotted leaf keys of `model`; a dict of models is named `<key>`, a list's items by the list."""
    keys = []
    for name, field in model.model_fields.items():
        models = _models_in(field.annotation)
        inner = f"{prefix}{name}.<key>." if typing.get_origin(field.annotation) is dict else f"{prefix}{name}."
        if models:
            keys += [k for m in models for k in leaf_keys(m, inner)]
        else:
            keys.append(prefix + name)
    return keys


def test_the_config_has_at_most_90_leaf_keys():
    keys = leaf_keys(PipelineConfig)
    assert len(keys) == len(set(keys))
    assert len(keys) <= MAX_LEAF_KEYS, f"{len(keys)} leaf keys:\n" + "\n".join(keys)


def test_the_count_walks_nested_sections_lists_and_dicts_of_models():
    keys = leaf_keys(PipelineConfig)
    assert {"echo.factor", "preprocess.augment.ops.op", "search.space.<key>.one_minus", "source.tokenizer.kind",
            "source.options", "schedule.milestones"} <= set(keys)
    assert "search.space" not in keys and "preprocess.augment.ops" not in keys
