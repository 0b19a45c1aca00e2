"""`echoray train --set source.path=FOLDER` without a pipeline file: the embedded digits
pipeline's defaults, fitted to the user's data, and said.

What is inferred goes in as `--set` assignments before the user's own (which win):
- `source.kind` from what the folder holds (class folders: image_folder; .parquet
  files: parquet), where the user gave none;
- `name`, the run folder's prefix and the MLflow param: the folder's name;
- `source.image_size` for an image folder: the images' shorter side (the median of up
  to HEADER_SAMPLE files' headers, at most MAX_SIZE), instead of digits' 16 pixels.
`notes` says each of these, which defaults came from the digits pipeline, and, once the
config is known, how many training examples the batch size leaves out of each epoch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import pyarrow.fs as pafs

from echoray.config import PipelineConfig
from echoray.config_load import ConfigError, parse_yaml
from echoray.data.sources import SourceError, index_source
from echoray.data.sources.base import filesystem, require_dir
from echoray.data.sources.image_folder import EXTENSIONS
from echoray.echo_plan import EchoPlan

HEADER_SAMPLE = 256  # image headers read to size the images (evenly spaced over the files)
MAX_SIZE = 224  # an inferred side above it (photos) is capped: a larger one is the user's choice
# The digits defaults a newcomer's data most likely needs changed, said by name.
SHOWN_DEFAULTS = ("model.name", "optimizer.lr", "train.batch_size", "train.max_epochs", "train.target")


@dataclass
class OwnData:
    """The inferred `--set` assignments (before the user's) and the lines that say them."""

    overrides: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    path: str | None = None  # source.path, where the defaults were fitted


def _given(overrides: list[str]) -> dict[str, str]:
    return {a.partition("=")[0].strip(): a.partition("=")[2] for a in overrides}


def own_data(pipeline: str | None, overrides: list[str]) -> OwnData:
    """The own-data defaults of `echoray train [--set ...]`: none with a pipeline file or
    without `--set source.path`. ConfigError where the folder's format cannot be told."""
    given = _given(overrides)
    if pipeline or "source.path" not in given:
        return OwnData()
    path = str(parse_yaml(given["source.path"]) or "")
    out = OwnData(path=path)
    kind = parse_yaml(given["source.kind"]) if "source.kind" in given else None
    if kind is None:
        kind = infer_kind(path)
        out.overrides.append(f"source.kind={kind}")
        out.notes.append(f"source.kind {kind}: {path} holds "
                         + ("class folders" if kind == "image_folder" else ".parquet files"))
    if "name" not in given:
        name = re.sub(r"[^\w.-]+", "_", PurePosixPath(path.rstrip("/")).name) or "data"
        out.overrides.append(f"name={name}")
    if kind == "image_folder" and "source.image_size" not in given:
        size, note = size_from_images(path)
        if size is not None:
            out.overrides.append(f"source.image_size={size}")
            out.notes.append(note)
    taken = [k for k in SHOWN_DEFAULTS if k not in given]
    if taken:
        d = PipelineConfig()
        values = ", ".join(f"{k} {_value(d, k)}" for k in taken)
        out.notes.append(f"defaults from the embedded digits pipeline (pipelines/digits.yaml): {values}; "
                         "change any with --set KEY=VALUE")
    return out


def _value(cfg: PipelineConfig, key: str) -> str:
    node = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return "null" if node is None else f"{node:g}" if isinstance(node, float) else str(node)


def _listing(path: str) -> tuple[pafs.FileSystem, list[pafs.FileInfo]]:
    try:
        fs, root = filesystem(path)
        info = fs.get_file_info(root)
        if info.type == pafs.FileType.NotFound:
            raise ConfigError(f"--set source.path={path}: no such file or folder")
        if info.type == pafs.FileType.File:
            return fs, [info]
        return fs, fs.get_file_info(pafs.FileSelector(root, recursive=False))
    except SourceError as exc:
        raise ConfigError(str(exc)) from None


def infer_kind(path: str) -> str:
    """image_folder (class folders) or parquet (.parquet files) from what `path` holds."""
    _, entries = _listing(path)
    if any(e.type == pafs.FileType.Directory for e in entries):
        return "image_folder"
    if any(e.base_name.endswith(".parquet") for e in entries):
        return "parquet"
    raise ConfigError(f"--set source.path={path}: neither class folders (root/<class>/<image>) nor .parquet "
                      "files: set source.kind (image_folder, parquet, idx, cifar10, text; docs/how-to/own-data.md)")


def size_from_images(path: str) -> tuple[int | None, str | None]:
    """(source.image_size, the line saying it): the median shorter side of up to
    HEADER_SAMPLE images (headers only), at most MAX_SIZE; (None, None) without an image."""
    from PIL import Image

    fs, root = filesystem(path)
    require_dir(fs, root, "source.path")  # SourceError naming it (exit 2)
    files = sorted(i.path for i in fs.get_file_info(pafs.FileSelector(root, recursive=True))
                   if i.type == pafs.FileType.File and i.base_name.lower().endswith(EXTENSIONS))
    step = max(1, len(files) // HEADER_SAMPLE)
    sizes = []
    for name in files[::step][:HEADER_SAMPLE]:
        try:
            with fs.open_input_file(name) as f, Image.open(f) as img:
                sizes.append(img.size)
        except (OSError, ValueError):
            continue  # undecodable: the run counts it against source.max_bad_fraction
    if not sizes:
        return None, None  # no images: the source's index says what is missing
    sides = sorted(min(w, h) for w, h in sizes)
    side = min(sides[len(sides) // 2], MAX_SIZE)
    if len(set(sizes)) == 1 and sizes[0][0] == sizes[0][1] == side:
        how = f"the images are {side}x{side}"
    else:
        (w0, h0), (w1, h1) = min(sizes), max(sizes)
        how = (f"{len(sizes)} images read, {w0}x{h0} to {w1}x{h1}: each is resized so its shorter side is {side} "
               f"and centre-cropped" + (f" ({MAX_SIZE} at most)" if side == MAX_SIZE else ""))
    return side, f"source.image_size {side}: {how}; set source.image_size to choose"


def left_out_note(cfg: PipelineConfig) -> str | None:
    """How many training examples the batch size leaves out of each epoch (the last,
    partial batch is not trained), or None where it leaves none or echo sets the count."""
    plan = EchoPlan.from_config(cfg)
    if plan.examples or plan.on_batches:
        return None
    num_train = len(index_source(cfg.source, cfg.train.store_retry_s()).train_ids)
    readers = cfg.scaling.max_workers // (cfg.batch_augmentation.copies
                                          if cfg.batch_augmentation.mode == "grouped" else 1)
    per_step = readers * cfg.train.batch_size
    steps = plan.steps_per_shard_epoch(cfg.train.batch_size, num_train, readers)
    left = num_train - steps * per_step
    if left <= 0:
        return None
    verb = "is" if left == 1 else "are"
    return (f"train.batch_size {cfg.train.batch_size} x {readers} worker(s): {left} of the {num_train} training "
            f"examples {verb} left out of each epoch (the last, partial batch; the shuffle leaves out others "
            f"each epoch); a batch size dividing {num_train} uses them all")
