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
    PrivateAttr,
    field_validator,
    model_serializer,
    model_validator,
)

from echoray import plugins
from echoray.echo_plan import EchoPlan

PositiveInt = Annotated[int, Field(ge=1)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, use_attribute_docstrings=True)


# Built-in names; a section also takes "package.module:attr" (echoray/plugins.py). Append here.
SOURCE_KINDS: tuple[str, ...] = ("digits", "cifar10", "image_folder", "parquet", "idx", "text")
MODEL_NAMES: tuple[str, ...] = ("small_cnn", "resnet20", "resnet32", "resnet44", "resnet56", "resnet50",
                                "transformer_lm")
AUGMENT_OPS: tuple[str, ...] = ("random_crop", "flip", "cutout", "random_resized_crop")


class TokenizerConfig(Section):
    """How text becomes tokens (source.kind: text, data/text/tokenizers.py): `bytes`, the
    256 byte values + end-of-document; `bpe`, a byte-level BPE of vocab_size symbols
    trained once on the training split (deterministic), or loaded from `path` (a
    tokenizer.json an earlier run saved)."""

    kind: Literal["bytes", "bpe"] = "bytes"
    """bytes: 256 byte values + end of document; bpe: byte-level BPE (Hugging Face tokenizers)."""
    vocab_size: Annotated[int, Field(ge=260, le=1 << 20)] = 4096
    """bpe: symbols in the vocabulary."""
    path: str | None = None
    """bpe: a tokenizer.json to load (an earlier run's) instead of training one."""


class SourceConfig(Section):
    kind: str = "digits"
    """Source format: digits, cifar10, image_folder, parquet, idx, text (SOURCE_KINDS), or a reader class \"package.module:Reader\". In order: scikit-learn's bundled digits, CIFAR-10 batches, class-per-folder images, Parquet of encoded images and labels, the MNIST family's IDX files (Fashion-MNIST), or text documents (language models)."""
    path: str | None = None
    """Training data: a local folder or file, or a URI pyarrow reads (s3://, gs://); required unless kind is digits."""
    eval_path: str | None = None
    """Held-out data in the same format; null: the CIFAR test batch, or holdout_fraction of the training files."""
    holdout_fraction: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.2
    """Fraction of the training data held out for evaluation when there is no eval_path."""
    image_size: PositiveInt | None = 16
    """Side in pixels images are resized to (the evaluation size when random_resized_crop is the first CPU op); null: as stored."""
    chunk_size: PositiveInt = 1
    """Examples per read-plan chunk: the unit the per-epoch seeded permutation shuffles."""
    limit: PositiveInt | None = None
    """Use at most this many training examples (short runs, tests); null: all."""
    eval_limit: PositiveInt | None = None
    """Use at most this many held-out examples; null: all."""
    image_column: str = "image"
    """Parquet column holding the encoded image bytes."""
    label_column: str = "label"
    """Parquet column holding the integer label."""
    max_bad_fraction: Fraction = 0.0
    """Fraction of a split that may be undecodable and skipped (counted in faults.skipped_bad_examples); beyond it the run stops."""
    seq_len: PositiveInt = 128
    """source.kind text: tokens per packed sequence (each sample holds seq_len + 1)."""
    text_suffixes: list[str] = [".txt", ".rst", ".md"]
    """source.kind text: file name endings that are documents (each also as .gz)."""
    text_exclude: list[str] = []
    """source.kind text: glob patterns of paths under source.path to leave out (\"translations/*\")."""
    text_column: str | None = None
    """source.kind text: set, source.path holds Parquet and each row of this column is a document."""
    tokenizer: TokenizerConfig = TokenizerConfig()
    """source.kind text: how documents become tokens."""
    options: dict[str, Any] = {}
    """Keyword options for a reader by import path (its index(cfg) reads cfg.options)."""

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
    keys in the YAML are its own Params (data/ops.py: read as `params`, written back flat)."""

    op: str
    """The augmentation: random_crop (with padding), flip, cutout, random_resized_crop (Inception's area and aspect ranges), or an op class \"package.module:Op\"."""
    padding: Annotated[int, Field(ge=0)] = 0
    """Pixels of zero padding before random_crop."""
    size: PositiveInt | None = None
    """Output side (random_resized_crop) or square side (cutout); required by those two."""
    p: Fraction = 0.5
    """Probability of applying flip."""
    _params: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def params(self) -> dict[str, Any]:
        """An op by import path: its own keys, validated by its Params (defaults filled in)."""
        return self._params

    @model_validator(mode="wrap")
    @classmethod
    def _own_keys(cls, data: Any, handler) -> AugmentOp:
        """An op by import path: every key but `op` is the op's own, checked by its Params."""
        if not (isinstance(data, dict) and plugins.is_import_path(data.get("op"))):
            return handler(data)
        own = {k: v for k, v in data.items() if k != "op"}
        op = handler({"op": data["op"]})
        klass = plugins.check_op_class(op.op, own, "op")
        params = plugins.op_params(klass, own, "op", op.op)
        op._params = params.model_dump(mode="json") if hasattr(params, "model_dump") else own
        return op

    @field_validator("op")
    @classmethod
    def _op(cls, v: object) -> str:
        return plugins.builtin_or_path(v, AUGMENT_OPS)

    @model_serializer(mode="wrap")
    def _flat(self, handler):
        if plugins.is_import_path(self.op):
            return {"op": self.op, **self.params}
        return handler(self)

    @model_validator(mode="after")
    def _sizes(self) -> AugmentOp:
        if self.op in ("cutout", "random_resized_crop") and self.size is None:
            raise ValueError(f"augment op {self.op!r} needs 'size'")
        return self


class ActorPoolConfig(Section):
    min_size: PositiveInt = 1
    """Fewest preprocessing actors in Ray Data's pool."""
    max_size: PositiveInt = 1
    """Most preprocessing actors the pool (and an autoscaler's CPU nodes) may grow to."""
    num_cpus: Annotated[float, Field(gt=0)] = 0.5
    """CPUs each preprocessing actor reserves."""
    resources: dict[str, float] = {}
    """Custom Ray resources each actor asks for, e.g. {cpu_node: 0.001} to run on CPU node types (dropped where no node has them)."""

    @model_validator(mode="after")
    def _order(self) -> ActorPoolConfig:
        if self.max_size < self.min_size:
            raise ValueError("max_size must be >= min_size")
        return self


class AugmentConfig(Section):
    ops: list[AugmentOp] = [AugmentOp(op="random_crop", padding=2)]
    """Per-sample augmentation ops, applied in order, keyed by (seed, epoch, sample_id, echo copy)."""
    # cpu: in the Ray Data actors; worker: on the training device inside the worker.
    on: Literal["cpu", "worker"] = "cpu"
    """Where the ops run: cpu (in the Ray Data actors) or worker (on the training device, needed for batch augmentation)."""


class PreprocessConfig(Section):
    augment: AugmentConfig = AugmentConfig()
    """The augmentation ops and where they run."""
    mean: list[float] | None = None
    """Per-channel normalisation mean of x/255 on the worker; null: 0.5 per channel."""
    std: list[float] | None = None
    """Per-channel normalisation standard deviation; null: 0.25 per channel."""
    batch_size: PositiveInt = 128
    """Rows per Ray Data batch handed to a preprocessing actor call."""
    actors: ActorPoolConfig = ActorPoolConfig()
    """The preprocessing actor pool."""


class EchoConfig(Section):
    stage: Literal["none", "before_augment", "after_augment", "batch"] = "none"
    """Where data echoing repeats data: none, before or after augmentation (in the preprocessing actor), or whole batches on the worker."""
    factor: Annotated[float, Field(ge=1, allow_inf_nan=False)] | Literal["auto"] = 1.0
    """Echo factor e >= 1 (fractional: floor(e) + Bernoulli(e - floor(e)) copies per item), or auto: e follows the measured R."""
    shuffle_buffer: Annotated[int, Field(ge=0)] = 512
    """Rows in each worker's shuffle buffer that spreads an example's copies."""
    max_factor: Annotated[float, Field(ge=1)] = 8.0
    """Upper bound on e under factor: auto, where it is also e until the first window of R is measured; a worker with no fresh batch ready trains extra copies of samples it trained lately (at most max_factor per sample) instead of waiting."""

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
    """M: augmented views of every sample per batch (1: off); needs preprocess.augment.on: worker."""
    # local: each worker makes all M views of its B samples (view-major rows).
    # grouped (Hoffer et al. 2020, 4.5): groups of M workers share one batch of B samples
    # and member m makes only view m, so no worker holds two views of one sample.
    mode: Literal["local", "grouped"] = "local"
    """local: each worker makes all M views of its B samples; grouped: groups of M workers share B samples, member m makes view m."""
    # Accumulate the M views as M forward/backward passes (bounds memory; same gradient
    # as the M*B batch for models without batch norm).
    accumulate: bool = False
    """Run the M views as M forward/backward passes of B rows (bounds memory; one gradient step)."""
    # Test-time augmentation: also score the held-out split averaged over K views.
    tta_views: Annotated[int, Field(ge=0)] = 0
    """Test-time augmentation: also score the held-out split averaged over K views (accuracy_tta); 0: off."""


class ModelConfig(Section):
    name: str = "small_cnn"
    """Network: small_cnn, resnet20, resnet32, resnet44, resnet56, resnet50, transformer_lm (source.kind text) (MODEL_NAMES), or a factory \"package.module:factory\"."""
    width: PositiveInt = 32
    """Base channel width of small_cnn; model width of transformer_lm."""
    layers: PositiveInt = 4
    """transformer_lm: Transformer blocks (context = source.seq_len)."""
    heads: PositiveInt = 4
    """transformer_lm: attention heads per block."""
    dropout: Fraction = 0.0
    """Dropout probability before the classifier."""
    ghost_batch_size: PositiveInt | None = None
    """Ghost batch norm: normalise contiguous chunks of this many rows; null: the whole batch."""
    kwargs: dict[str, Any] = {}
    """Keyword arguments of a model factory by import path (train/models.py build_model)."""

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
    name: Literal["sgd", "adamw"] = "sgd"
    """Optimizer: SGD, or AdamW for language models (momentum is Adam's beta1, weight_decay decoupled)."""
    lr: Annotated[float, Field(gt=0)] = 0.05
    """Peak learning rate."""
    momentum: Annotated[float, Field(ge=0, lt=1)] = 0.9
    """SGD momentum."""
    beta2: Annotated[float, Field(ge=0, lt=1)] = 0.999
    """adamw: second-moment decay."""
    nesterov: bool = True
    """Nesterov momentum."""
    weight_decay: Annotated[float, Field(ge=0)] = 5e-4
    """L2 weight decay."""


class ScheduleConfig(Section):
    name: Literal["cosine", "step", "constant"] = "cosine"
    """Learning-rate schedule after warm-up: cosine over train.max_epochs, step decay at milestones, or constant."""
    warmup_epochs: Annotated[float, Field(ge=0)] = 1.0
    """Epochs of linear warm-up to optimizer.lr."""
    milestones: list[float] = []
    """Epochs at which the step schedule multiplies the rate by gamma."""
    gamma: Annotated[float, Field(gt=0, le=1)] = 0.1
    """The step schedule's factor per milestone."""


class TrainConfig(Section):
    batch_size: PositiveInt = 64
    """B: samples per worker per step."""
    max_epochs: PositiveInt = 20
    """Budget in epochs: passes over the training set's fresh examples (echo copies and views do not count)."""
    max_fresh_examples: PositiveInt | None = None
    """Budget in fresh examples read; null: max_epochs alone."""
    metric: Literal["accuracy", "bits_per_byte", "perplexity"] = "accuracy"
    """Held-out metric the target applies to: accuracy (reach above) or, for language models, bits_per_byte / perplexity (reach below; echoray/metrics.py)."""
    target: Annotated[float, Field(ge=0)] | None = 0.97
    """Stop when the held-out metric reaches this (in the metric's direction); null: train until the budget is spent."""
    # Evaluations per epoch, at every n_train/k fresh examples (echoray/epochs.py), at any
    # echo factor; the last one at the run's end: fresh examples and time to target are then
    # observed every 1/k epoch. At most the optimizer steps of one epoch at e = 1.
    evals_per_epoch: PositiveInt = 1
    """Held-out evaluations per epoch (pass of fresh data), at every 1/k of its fresh examples (fresh examples to target resolved to 1/k epoch)."""
    stall_timeout_s: Annotated[float, Field(gt=0)] = 180.0
    """Seconds without progress after which the run fails, naming the resources the cluster lacks; reads and checkpoint writes wait out an object store outage for half as long."""
    # A Ray Train checkpoint every N epochs (0: none): what worker retries and
    # `echoray train --resume` continue from. The last CHECKPOINTS_KEPT are kept. Every 2nd
    # epoch by default: a restart replays at most two epochs, and a run of short epochs (the
    # default digits run) does not spend a write per epoch.
    checkpoint_every: Annotated[int, Field(ge=0)] = 2
    """A checkpoint every N epochs (0: none): what worker restarts and echoray train --resume continue from; the last two are kept (all of them with the audit on)."""
    # Mixed precision of the train step (train/device.py): bf16 autocast runs on GPUs and
    # CPUs; fp16 adds a gradient scaler and needs a GPU (refused before start otherwise).
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    """Train-step precision: fp32, bf16 autocast (GPU or CPU), or fp16 with a gradient scaler (GPU only)."""
    channels_last: bool = False  # NHWC weights and inputs (tensor-core convolutions)
    """NHWC weights and inputs (tensor-core convolutions)."""
    compile: bool = False  # torch.compile the model (see README: where it helps)
    """Wrap the model in torch.compile."""
    # A progress line (epoch, step, examples/s, fresh/trained, echo factor, epoch ETA) and
    # the same figures to MLflow every this many seconds (0: evaluation lines only).
    log_every_s: Annotated[float, Field(ge=0)] = 10.0
    """Seconds between progress lines between evaluations (also logged to MLflow); 0: evaluation lines only."""
    # Where Ray Train writes checkpoints (a folder per run inside it): a local folder, a
    # shared mount, or an object store URI (s3://bucket/runs). null: the run folder, which
    # serves one node; a cluster needs storage every node reads (see echoray/storage/fs.py).
    storage_path: str | None = None
    """Where checkpoints go: a local folder, a shared mount or an object store URI; null: the run folder (one node)."""
    # A local storage_path that is shared storage on every node although its mount type
    # does not say so (network mounts such as NFS are recognised without it).
    storage_shared: bool = False
    """Declare a local storage_path shared by every node although its mount type does not say so."""

    def store_retry_s(self) -> float:
        """How long reads and checkpoint writes retry an object store that stops answering or
        returns 5xx / SlowDown (echoray/storage/retry.py): half of stall_timeout_s, so a
        store that stays down fails the run naming its URI before the stall watch ends it."""
        return self.stall_timeout_s / 2


class ScalingConfig(Section):
    num_workers: PositiveInt | tuple[int, int] = 1
    """Ray Train workers (data-parallel ranks): a number, or [min, max] for an elastic group that Ray Train sizes to what the cluster holds (at least min) and restarts from the last checkpoint with another size when that changes, counts exact (docs/how-to/resume.md)."""
    use_gpu: bool | Literal["auto"] = "auto"
    """Train on GPUs: true, false, or auto (when the cluster has one)."""
    cpus_per_worker: Annotated[float, Field(gt=0)] = 1.0
    """CPUs each train worker reserves (and torch threads it uses)."""
    resources_per_worker: dict[str, float] = {}
    """Custom Ray resources each worker asks for, e.g. {gpu_node: 0.001} (dropped where no node has them)."""
    # Restarts of the worker group from the last checkpoint after a worker dies (-1: no limit).
    max_failures: Annotated[int, Field(ge=-1)] = 0
    """Restarts of the worker group from the last checkpoint after a worker dies (-1: no limit)."""
    # Ray Train's local mode (ScalingConfig(num_workers=0)): the same train function in the
    # command's own process, no controller or worker group to start. Only where a worker group
    # would add nothing: one CPU worker, max_failures 0, local batch augmentation.
    local_mode: bool | Literal["auto"] = "auto"
    """Train in Ray Train's local mode, in the command's own process, where the run has one CPU worker without restarts: auto (when echoray started its own local Ray), true (also on a cluster), false (always a worker group)."""

    @field_validator("num_workers")
    @classmethod
    def _min_max(cls, v: int | tuple[int, int]) -> int | tuple[int, int]:
        if isinstance(v, tuple) and not 1 <= v[0] <= v[1]:
            raise ValueError(f"[min, max] needs 1 <= min <= max, got [{v[0]}, {v[1]}]")
        return v

    @property
    def elastic(self) -> bool:
        """num_workers is a [min, max] pair with min < max: the worker count may change mid-run."""
        return self.min_workers < self.max_workers

    @property
    def min_workers(self) -> int:
        return self.num_workers[0] if isinstance(self.num_workers, tuple) else self.num_workers

    @property
    def max_workers(self) -> int:
        """The most workers a group can have: what resources and first blocks are planned for."""
        return self.num_workers[1] if isinstance(self.num_workers, tuple) else self.num_workers

    def ray_num_workers(self) -> int | tuple[int, int]:
        """ScalingConfig(num_workers=...): a pair only where the count may change."""
        return (self.min_workers, self.max_workers) if self.elastic else self.max_workers


class TrackingConfig(Section):
    uri: str | None = None
    """MLflow tracking URI; null: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db in the current folder."""
    experiment: str = "echoray"
    """MLflow experiment the runs go to."""
    register_model: str | None = None
    """Register the trained model in the MLflow model registry under this name (a search: its best trial's); null: log it to the run only."""


class AuditConfig(Section):
    enabled: bool = False
    """Write audit.parquet: one row per example a train step consumed (epoch, step, worker, sample_id, views, augmentation key)."""


class SearchParam(Section):
    """One dimension of the quasi-random search: a range (linear or log) or choices.

    `one_minus: true` searches 1 - value instead (e.g. 1 - momentum on a log scale,
    as the data-echoing paper does); low/high then bound 1 - value.
    """

    low: float | None = None
    """Lower bound of the range (of 1 - value with one_minus)."""
    high: float | None = None
    """Upper bound of the range."""
    scale: Literal["linear", "log"] = "linear"
    """Sample the range uniformly (linear) or log-uniformly (log)."""
    choices: list[Any] | None = None
    """A list of values to choose from instead of a range."""
    one_minus: bool = False
    """Search 1 - value (e.g. 1 - momentum on a log scale)."""

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
    """Trials per repeat of the quasi-random search."""
    repeats: PositiveInt = 5
    """Independent repeats of the whole search (each its own scramble seed)."""
    max_concurrent: PositiveInt = 1
    """Trials at once, lowered to what the cluster's CPUs fit."""
    space: dict[str, SearchParam] = {}
    """Searched keys: dotted config key -> range or choices."""


class PipelineConfig(Section):
    name: str = "digits"
    """Pipeline name: the run folder's prefix and an MLflow param."""
    seed: Annotated[int, Field(ge=0)] = 0
    """Seed of every random stream (read plan, augmentation, echo draws, model init)."""
    source: SourceConfig = SourceConfig()
    """Where the data comes from."""
    preprocess: PreprocessConfig = PreprocessConfig()
    """Decode, normalise and augment in Ray Data's actor pool."""
    echo: EchoConfig = EchoConfig()
    """Data echoing."""
    batch_augmentation: BatchAugmentationConfig = BatchAugmentationConfig()
    """Batch augmentation."""
    model: ModelConfig = ModelConfig()
    """The network."""
    optimizer: OptimizerConfig = OptimizerConfig()
    """The optimizer."""
    schedule: ScheduleConfig = ScheduleConfig()
    """The learning-rate schedule."""
    train: TrainConfig = TrainConfig()
    """Batching, budget, target, evaluation, checkpoints, precision."""
    scaling: ScalingConfig = ScalingConfig()
    """Workers, GPUs and where training runs."""
    tracking: TrackingConfig = TrackingConfig()
    """MLflow."""
    audit: AuditConfig = AuditConfig()
    """Per-example audit log."""
    search: SearchConfig = SearchConfig()
    """Quasi-random hyperparameter search (echoray tune, study)."""

    @model_validator(mode="after")
    def _cross_section(self) -> PipelineConfig:
        _check_text(self)  # first: it empties a text run's (image) augmentation ops
        m = self.batch_augmentation.copies
        ops_on_cpu = self.preprocess.augment.on == "cpu" and self.preprocess.augment.ops
        if (m > 1 or self.batch_augmentation.tta_views) and ops_on_cpu:
            raise ValueError(
                "batch_augmentation.copies > 1 and batch_augmentation.tta_views make their views "
                "on the worker: set preprocess.augment.on: worker"
            )
        _check_worker_groups(self)
        worker_echo = EchoPlan.from_sections(self.echo, self.preprocess.augment).at_consumption
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


def _check_worker_groups(cfg: PipelineConfig) -> None:
    """scaling.num_workers against what needs a fixed count: groups of batch_augmentation.copies
    (train/groups.py), Ray Train's local mode (one worker), and a restart that loses nothing
    (an elastic group restarts from the last checkpoint, so it needs checkpoints)."""
    s, m = cfg.scaling, cfg.batch_augmentation.copies
    grouped = cfg.batch_augmentation.mode == "grouped"
    if not s.elastic:
        if grouped and s.max_workers % m:
            raise ValueError("scaling.num_workers must be a multiple of batch_augmentation.copies "
                             f"in grouped mode (got {s.max_workers} and {m})")
        return
    pair = f"scaling.num_workers [{s.min_workers}, {s.max_workers}]"
    if grouped and m > 1:
        raise ValueError(f"{pair}: Ray Train restarts an elastic worker group with any count from min to max, "
                         f"and batch_augmentation.mode: grouped needs a multiple of batch_augmentation.copies "
                         f"({m}); give one number, or use batch_augmentation.mode: local")
    if s.local_mode is True:
        raise ValueError(f"{pair}: scaling.local_mode: true trains one worker in the driver's process, which "
                         "cannot grow or shrink; set scaling.local_mode to auto or false, or give one number")
    if not cfg.train.checkpoint_every:
        raise ValueError(f"{pair}: an elastic worker group restarts from the last checkpoint when it is resized: "
                         "set train.checkpoint_every >= 1 (or give one number)")


def _check_text(cfg: PipelineConfig) -> None:
    """Text and image settings do not mix: an LM needs a text source (or a reader by import
    path that serves text units: data/sources/custom.py) and an LM metric, and text has no
    input augmentation (unset ops become [], set ones are refused)."""
    lm = cfg.model.name == "transformer_lm"
    text = lm if plugins.is_import_path(cfg.source.kind) else cfg.source.kind == "text"
    if text != lm:
        raise ValueError("source.kind: text goes with model.name: transformer_lm (and only with it)")
    if cfg.train.metric == "accuracy" and cfg.train.target is not None and cfg.train.target > 1:
        raise ValueError(f"train.target: accuracy is a fraction in [0, 1] (got {cfg.train.target})")
    if text != (cfg.train.metric != "accuracy"):
        raise ValueError("train.metric: text runs score bits_per_byte or perplexity, image runs accuracy")
    if not text:
        return
    aug = cfg.preprocess.augment
    if "ops" not in aug.model_fields_set:
        aug.ops = []
    elif aug.ops:
        raise ValueError("preprocess.augment.ops: text has no input augmentation; set it to [] or leave it out")
    if cfg.source.limit is not None:
        raise ValueError("source.limit: a text source is limited by its path (or source.text_exclude), "
                         "not by a count of sequences")
    if cfg.source.chunk_size != 1:
        raise ValueError("source.chunk_size: a text plan's chunk is one read unit (data/text/source.py unit_bytes); "
                         "leave chunk_size at 1 (preprocess.batch_size counts units per actor call)")
    if cfg.model.width % cfg.model.heads:
        raise ValueError(f"model.width ({cfg.model.width}) must be a multiple of model.heads ({cfg.model.heads})")


def _is_leaf_key(node: BaseModel, parts: list[str]) -> bool:
    """True when the dotted path names a value (not a section) of the config tree."""
    for part in parts:
        if not isinstance(node, BaseModel) or part not in type(node).model_fields or part == "search":
            return False
        node = getattr(node, part)
    return not isinstance(node, BaseModel)
