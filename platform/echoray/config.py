"""One typed config tree that mirrors the pipeline YAML sections (see DESIGN.md).

Every model forbids unknown keys, so a typo is an error naming the key instead of
a silently ignored setting. Defaults are the embedded digits pipeline.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_serializer,
    model_validator,
)

from echoray import plugins

PositiveInt = Annotated[int, Field(ge=1)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class RemoteEmulation(Section):
    """Emulates reading over a network: time spent waiting, not computing."""

    latency_ms: Annotated[float, Field(ge=0)] = 0.0
    bandwidth_mb_s: Annotated[float, Field(gt=0)] | None = None
    # A store whose latency changes mid-run (benchmarks/echo.py: R falls, auto must follow):
    # latency_ms_after replaces latency_ms once change_after_s have passed since an actor's first read.
    change_after_s: Annotated[float, Field(gt=0)] | None = None
    latency_ms_after: Annotated[float, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _change(self) -> RemoteEmulation:
        if (self.change_after_s is None) != (self.latency_ms_after is None):
            raise ValueError("change_after_s and latency_ms_after go together")
        return self


# Built-in names; a section also takes "package.module:attr" (echoray/plugins.py). Append here.
SOURCE_KINDS: tuple[str, ...] = ("digits", "cifar10", "image_folder", "parquet")
MODEL_NAMES: tuple[str, ...] = ("small_cnn", "resnet20", "resnet32", "resnet44", "resnet56", "resnet50")
AUGMENT_OPS: tuple[str, ...] = ("random_crop", "flip", "cutout", "random_resized_crop")


class SourceConfig(Section):
    kind: str = "digits"  # a SOURCE_KINDS name or a reader class "package.module:Reader"
    path: str | None = None
    eval_path: str | None = None
    holdout_fraction: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.2
    image_size: PositiveInt | None = 16
    chunk_size: PositiveInt = 1
    limit: PositiveInt | None = None
    eval_limit: PositiveInt | None = None
    image_column: str = "image"
    label_column: str = "label"
    max_bad_fraction: Fraction = 0.0
    # Reads in flight per preprocessing actor (files of an image folder): hides an object
    # store's per-request latency (16 x 20 ms requests overlap: benchmarks/input_pipeline.py).
    read_concurrency: PositiveInt = 16
    # Fresh rows the preprocessing actors may read ahead of what the workers have trained
    # (null: as far as Ray Data's memory budget goes, which on a small dataset is the whole
    # run, read during worker start-up). Set, reading also waits for the worker group to
    # start, so a benchmark of an input-bound run is input-bound from its first step.
    # Raised to what the worker's buffers need (data/pipeline.py rows_ahead_floor).
    max_rows_ahead: PositiveInt | None = None
    remote: RemoteEmulation = RemoteEmulation()
    # Keyword options for a reader by import path (its index(cfg) reads cfg.options).
    options: dict[str, Any] = {}

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: object) -> str:
        return plugins.builtin_or_path(v, SOURCE_KINDS)

    @model_validator(mode="after")
    def _path_needed(self) -> SourceConfig:
        if plugins.is_import_path(self.kind):
            plugins.check_reader_class(self.kind)
            return self
        if self.options:
            raise ValueError("source.options is for a reader by import path (source.kind: 'package.module:Reader')")
        if self.kind != "digits" and not self.path:
            raise ValueError(f"source.path is required for source.kind={self.kind!r}")
        return self


class AugmentOp(Section):
    """A built-in op (AUGMENT_OPS, with the keys below) or an op class by import path, whose
    keys in the YAML are its own Params (data/ops.py: kept in `params`, written back flat)."""

    op: str
    padding: Annotated[int, Field(ge=0)] = 0
    size: PositiveInt | None = None
    p: Fraction = 0.5
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    params: dict[str, Any] = {}  # an op by import path: its keys, validated by its Params

    @model_validator(mode="before")
    @classmethod
    def _own_keys(cls, data: Any) -> Any:
        """An op by import path: every key but `op` is the op's own (into `params`)."""
        if isinstance(data, dict) and plugins.is_import_path(data.get("op")):
            rest = {k: v for k, v in data.items() if k not in ("op", "params")}
            return {"op": data["op"], "params": {**(data.get("params") or {}), **rest}}
        return data

    @field_validator("op")
    @classmethod
    def _op(cls, v: object) -> str:
        return plugins.builtin_or_path(v, AUGMENT_OPS)

    @model_serializer(mode="wrap")
    def _flat(self, handler):
        out = handler(self)
        if plugins.is_import_path(self.op):
            return {"op": self.op, **self.params}
        out.pop("params", None)
        return out

    @model_validator(mode="after")
    def _sizes(self) -> AugmentOp:
        if plugins.is_import_path(self.op):
            cls = plugins.check_op_class(self.op, self.params, "op")
            params = plugins.op_params(cls, self.params, "op", self.op)
            if params is not None and hasattr(params, "model_dump"):
                self.__dict__["params"] = params.model_dump(mode="json")  # defaults filled in
            return self
        if self.params:
            raise ValueError(f"params: only an op by import path takes them (op {self.op!r})")
        if self.op in ("cutout", "random_resized_crop") and self.size is None:
            raise ValueError(f"augment op {self.op!r} needs 'size'")
        return self


class ActorPoolConfig(Section):
    min_size: PositiveInt = 1
    max_size: PositiveInt = 1
    num_cpus: Annotated[float, Field(gt=0)] = 0.5
    resources: dict[str, float] = {}

    @model_validator(mode="after")
    def _order(self) -> ActorPoolConfig:
        if self.max_size < self.min_size:
            raise ValueError("max_size must be >= min_size")
        return self


class AugmentConfig(Section):
    ops: list[AugmentOp] = [AugmentOp(op="random_crop", padding=2)]
    # cpu: in the Ray Data actors; worker: on the training device inside the worker.
    on: Literal["cpu", "worker"] = "cpu"


class PreprocessConfig(Section):
    augment: AugmentConfig = AugmentConfig()
    # Keep Ray Data's output order fixed, so one seed gives one sequence of batches
    # (and, on CPU, the same losses); echo.factor: auto still follows live timings.
    deterministic: bool = True
    mean: list[float] | None = None
    std: list[float] | None = None
    batch_size: PositiveInt = 128
    actors: ActorPoolConfig = ActorPoolConfig()


class EchoConfig(Section):
    stage: Literal["none", "before_augment", "after_augment", "batch"] = "none"
    factor: float | Literal["auto"] = 1.0
    shuffle_buffer: Annotated[int, Field(ge=0)] = 512
    # Repack batches so echoed copies of one example rarely share a batch (train/batching.py).
    separate_copies: bool = True
    max_factor: Annotated[float, Field(ge=1)] = 8.0

    @field_validator("factor")
    @classmethod
    def _factor(cls, v: float | str) -> float | str:
        if v == "auto":
            return v
        if not isinstance(v, (int, float)) or math.isnan(v) or math.isinf(v) or v < 1:
            raise ValueError("must be a finite number >= 1 or 'auto'")
        return float(v)


class BatchAugmentationConfig(Section):
    copies: PositiveInt = 1
    # local: each worker makes all M views of its B samples (view-major rows).
    # grouped (Hoffer et al. 2020, 4.5): groups of M workers share one batch of B samples
    # and member m makes only view m, so no worker holds two views of one sample.
    mode: Literal["local", "grouped"] = "local"
    # Accumulate the M views as M forward/backward passes (bounds memory; same gradient
    # as the M*B batch for models without batch norm).
    accumulate: bool = False
    # Test-time augmentation: also score the held-out split averaged over K views.
    tta_views: Annotated[int, Field(ge=0)] = 0


class ModelConfig(Section):
    name: str = "small_cnn"  # a MODEL_NAMES name or a factory "package.module:factory"
    width: PositiveInt = 32
    dropout: Fraction = 0.0
    ghost_batch_size: PositiveInt | None = None
    # Keyword arguments of a factory by import path (train/models.py build_model).
    kwargs: dict[str, Any] = {}

    @field_validator("name")
    @classmethod
    def _name(cls, v: object) -> str:
        return plugins.builtin_or_path(v, MODEL_NAMES)

    @model_validator(mode="after")
    def _factory(self) -> ModelConfig:
        if plugins.is_import_path(self.name):
            plugins.check_model_factory(self.name, self.kwargs)
        elif self.kwargs:
            raise ValueError("model.kwargs is for a model factory by import path (model.name: 'package.module:factory')")
        return self


class OptimizerConfig(Section):
    name: Literal["sgd"] = "sgd"
    lr: Annotated[float, Field(gt=0)] = 0.05
    momentum: Annotated[float, Field(ge=0, lt=1)] = 0.9
    nesterov: bool = True
    weight_decay: Annotated[float, Field(ge=0)] = 5e-4


class ScheduleConfig(Section):
    name: Literal["cosine", "step", "constant"] = "cosine"
    warmup_epochs: Annotated[float, Field(ge=0)] = 1.0
    milestones: list[float] = []
    gamma: Annotated[float, Field(gt=0, le=1)] = 0.1


class TrainConfig(Section):
    batch_size: PositiveInt = 64
    max_epochs: PositiveInt = 20
    max_fresh_examples: PositiveInt | None = None
    metric: Literal["accuracy"] = "accuracy"
    target: Fraction | None = 0.97  # null: no target, train until the budget is spent
    # Evaluations per epoch of fresh data, at evenly spaced points (steps, or fresh examples
    # under echo.factor: auto): fresh examples and time to target are then observed every
    # 1/k epoch instead of once per epoch. At most the optimizer steps of one epoch at e = 1.
    evals_per_epoch: PositiveInt = 1
    stall_timeout_s: Annotated[float, Field(gt=0)] = 180.0
    # A Ray Train checkpoint every N epochs (0: none): what worker retries and
    # `echoray train --resume` continue from; at most one per checkpoint_min_interval_s,
    # so sub-second epochs do not wait on Ray Train's report round trip. The last few are kept.
    checkpoint_every: Annotated[int, Field(ge=0)] = 1
    checkpoint_min_interval_s: Annotated[float, Field(ge=0)] = 10.0
    checkpoints_to_keep: PositiveInt = 2
    # Mixed precision of the train step (train/device.py): bf16 autocast runs on GPUs and
    # CPUs; fp16 adds a gradient scaler and needs a GPU (refused before start otherwise).
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    channels_last: bool = False  # NHWC weights and inputs (tensor-core convolutions)
    compile: bool = False  # torch.compile the model (see README: where it helps)
    # A progress line (step, examples/s, fresh/trained, echo factor, epoch ETA) and the
    # same figures to MLflow every this many seconds during an epoch (0: epoch lines only).
    log_every_s: Annotated[float, Field(ge=0)] = 10.0
    # Where Ray Train writes checkpoints (a folder per run inside it): a local folder, a
    # shared mount, or an object store URI (s3://bucket/runs). null: the run folder, which
    # serves one node; a cluster needs storage every node reads (see echoray/storage.py).
    storage_path: str | None = None
    # A local storage_path that is shared storage on every node although its mount type
    # does not say so (network mounts such as NFS are recognised without it).
    storage_shared: bool = False


class ScalingConfig(Section):
    num_workers: PositiveInt = 1
    use_gpu: bool | Literal["auto"] = "auto"
    cpus_per_worker: Annotated[float, Field(gt=0)] = 1.0
    resources_per_worker: dict[str, float] = {}
    # Restarts of the worker group from the last checkpoint after a worker dies (-1: no limit).
    max_failures: Annotated[int, Field(ge=-1)] = 0
    # Train in the command's own process (train/in_process.py) instead of a Ray Train worker
    # group, with the same Ray Data stream, accounting and checkpoints: no controller,
    # worker, DatasetManager or SplitCoordinator process to start (default digits run on
    # 2 cores: first step at 10.8 s instead of 22.0 s). Only for runs that use nothing of
    # Ray Train: one CPU worker, max_failures 0, local batch augmentation.
    # auto: when `echoray train` started its own local Ray (not on a cluster, RAY_ADDRESS);
    # true: also on a cluster (the driver trains); false: always Ray Train.
    in_process: bool | Literal["auto"] = "auto"


class TrackingConfig(Section):
    uri: str | None = None
    experiment: str = "echoray"


class AuditConfig(Section):
    enabled: bool = False


class SearchParam(Section):
    """One dimension of the quasi-random search: a range (linear or log) or choices.

    `one_minus: true` searches 1 - value instead (e.g. 1 - momentum on a log scale,
    as the data-echoing paper does); low/high then bound 1 - value.
    """

    low: float | None = None
    high: float | None = None
    scale: Literal["linear", "log"] = "linear"
    choices: list[Any] | None = None
    one_minus: bool = False

    @model_validator(mode="after")
    def _range_or_choices(self) -> SearchParam:
        if self.choices is not None:
            if self.low is not None or self.high is not None or self.one_minus:
                raise ValueError("give either choices or low/high (with scale, one_minus), not both")
            if not self.choices:
                raise ValueError("choices must not be empty")
            return self
        if self.low is None or self.high is None:
            raise ValueError("needs low and high (or choices)")
        if not self.low < self.high:
            raise ValueError(f"low must be below high (got low={self.low}, high={self.high})")
        if self.scale == "log" and self.low <= 0:
            raise ValueError(f"scale log needs low > 0 (got {self.low})")
        return self


class SearchConfig(Section):
    trials: PositiveInt = 8
    repeats: PositiveInt = 5
    max_concurrent: PositiveInt = 1
    sequence: Literal["halton", "sobol"] = "halton"  # scrambled, from scipy.stats.qmc
    space: dict[str, SearchParam] = {}
    # A one-CPU-worker trial with scaling.max_failures 0 trains inside its Tune trial actor,
    # which Tune reuses, instead of starting a Ray Train controller and worker group per
    # trial (train/in_process.py: 36 s -> a few s of overhead per digits trial). false:
    # every trial is a Ray Train fit (its checkpoints, its restarts).
    warm_trials: bool = True


class PipelineConfig(Section):
    name: str = "digits"
    seed: Annotated[int, Field(ge=0)] = 0
    source: SourceConfig = SourceConfig()
    preprocess: PreprocessConfig = PreprocessConfig()
    echo: EchoConfig = EchoConfig()
    batch_augmentation: BatchAugmentationConfig = BatchAugmentationConfig()
    model: ModelConfig = ModelConfig()
    optimizer: OptimizerConfig = OptimizerConfig()
    schedule: ScheduleConfig = ScheduleConfig()
    train: TrainConfig = TrainConfig()
    scaling: ScalingConfig = ScalingConfig()
    tracking: TrackingConfig = TrackingConfig()
    audit: AuditConfig = AuditConfig()
    search: SearchConfig = SearchConfig()

    @model_validator(mode="after")
    def _cross_section(self) -> PipelineConfig:
        m = self.batch_augmentation.copies
        ops_on_cpu = self.preprocess.augment.on == "cpu" and self.preprocess.augment.ops
        if (m > 1 or self.batch_augmentation.tta_views) and ops_on_cpu:
            raise ValueError(
                "batch_augmentation.copies > 1 and batch_augmentation.tta_views make their views "
                "on the worker: set preprocess.augment.on: worker"
            )
        if self.batch_augmentation.mode == "grouped" and self.scaling.num_workers % m:
            raise ValueError(
                "scaling.num_workers must be a multiple of batch_augmentation.copies "
                f"in grouped mode (got {self.scaling.num_workers} and {m})"
            )
        aug = self.preprocess.augment
        worker_echo = self.echo.factor == "auto" and (  # train/consumption_echo.py echoes_on_worker
            self.echo.stage == "after_augment"
            or (self.echo.stage == "before_augment" and (aug.on == "worker" or not aug.ops)))
        if worker_echo and self.batch_augmentation.mode == "grouped" and m > 1:
            raise ValueError("echo.factor: auto with example echo is decided on the reading worker, which "
                             "batch_augmentation.mode: grouped does not support yet (use mode: local or a fixed factor)")
        if self.train.precision == "fp16" and self.scaling.use_gpu is False:
            raise ValueError("train.precision: fp16 needs a GPU, but scaling.use_gpu is false (use bf16 or fp32)")
        if self.scaling.max_failures and not self.train.checkpoint_every:
            raise ValueError(
                "scaling.max_failures restarts workers from the last checkpoint: "
                "set train.checkpoint_every >= 1 (or scaling.max_failures: 0)"
            )
        for key in self.search.space:
            if not _is_leaf_key(self, key.split(".")):
                raise ValueError(f"search.space.{key}: not a config key (use a dotted path such as optimizer.lr)")
        return self


def _is_leaf_key(node: BaseModel, parts: list[str]) -> bool:
    """True when the dotted path names a value (not a section) of the config tree."""
    for part in parts:
        if not isinstance(node, BaseModel) or part not in type(node).model_fields or part == "search":
            return False
        node = getattr(node, part)
    return not isinstance(node, BaseModel)
