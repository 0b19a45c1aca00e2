"""Pure: study variants ("baseline", "after_augment:2", "ba:4") -> config overrides."""

from __future__ import annotations

from dataclasses import dataclass

ECHO_STAGES = ("before_augment", "after_augment", "batch")
DEFAULT_VARIANTS = ("baseline", "before_augment:2", "after_augment:2", "batch:2")
LABELS = {"before_augment": "echo before aug.", "after_augment": "echo after aug.", "batch": "batch echo"}


@dataclass(frozen=True)
class Variant:
    name: str
    stage: str = "none"
    factor: float = 1.0
    copies: int = 1

    @property
    def slug(self) -> str:
        return self.name.replace(":", "-")

    @property
    def label(self) -> str:
        if self.copies > 1:
            return f"BA M={self.copies}"
        if self.stage == "none":
            return "baseline"
        return f"{LABELS[self.stage]} e={self.factor:g}"

    def overrides(self) -> dict[str, object]:
        """Dotted keys to set on the study's pipeline."""
        out: dict[str, object] = {"echo.stage": self.stage, "echo.factor": self.factor,
                                  "batch_augmentation.copies": self.copies}
        if self.copies > 1:
            out["preprocess.augment.on"] = "worker"  # BA makes its M views on the worker
        return out


def parse_variant(text: str) -> Variant:
    name = text.strip()
    if name == "baseline":
        return Variant(name)
    kind, sep, arg = name.partition(":")
    try:
        value = float(arg) if sep else None
    except ValueError:
        value = None
    if kind in ECHO_STAGES and value is not None and value >= 1:
        return Variant(name, stage=kind, factor=value)
    if kind == "ba" and value is not None and value >= 1 and value == int(value):
        return Variant(name, copies=int(value))
    raise ValueError(
        f"--variants: {name!r} is not a variant; use baseline, before_augment:E, after_augment:E, "
        "batch:E (echo factor E >= 1) or ba:M (batch augmentation with M copies)")


def parse_variants(items: list[str] | None) -> list[Variant]:
    names = [n for item in (items or DEFAULT_VARIANTS) for n in item.split(",") if n.strip()]
    variants = [parse_variant(n) for n in names]
    seen = [v.slug for v in variants]
    if len(set(seen)) != len(seen):
        raise ValueError(f"--variants: a variant is listed twice ({', '.join(seen)})")
    return variants
