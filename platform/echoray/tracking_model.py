"""The trained model as an MLflow model of the run: loadable with `mlflow.pytorch.load_model`
without echoray.

The driver logs it at the end of a run from the weights the run ended with: rank 0 hands
them to the run's collector as its train function returns (worker/ray_worker.py; the weights
travel through Ray, so a worker on another node needs neither shared storage nor a
tracking server it can reach), in a worker group and in Ray Train's local mode alike, so a
run that keeps no checkpoints (train.checkpoint_every: 0, a search's warm trials) logs
one too. The driver builds the network from the config, loads those weights and saves it
in MLflow's `pt2` format (torch.export: a graph and its weights, no pickled echoray
classes). An image model takes what a source reader yields, uint8 N x H x W x C at the
model's input side, and normalises inside (preprocess.mean/std, as training did); it
returns N x num_classes logits. A language model takes int64 token ids N x T
(T <= source.seq_len) and returns N x T x vocab logits; a BPE tokenizer.json is logged with
it. The model's tag `echoray.epoch` is the epoch the run ended at (summary.json's `epochs`:
passes of fresh data, fractional).

With tracking.register_model the model of a run that is not a search's trial is
registered under that name; a search registers its best trial's (register_best_trial).
Measured: docs/concepts.md (MLflow: the time a load takes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from echoray.config import PipelineConfig
from echoray.data.sources import SourceIndex
from echoray.messages import say

MODEL_NAME = "model"


def served_model(cfg: PipelineConfig, idx: SourceIndex, weights: dict[str, Any]):
    """The trained network in eval mode, an image one behind its normalisation."""
    from echoray.tracking_served import Normalized
    from echoray.train.models import build_model

    side = _side(cfg, idx)
    net = build_model(cfg.model, idx.channels, idx.num_classes, side, context=cfg.source.seq_len)
    if cfg.model.ghost_batch_size:
        from echoray.train.ghost_bn import use_ghost_batch_norm

        net = use_ghost_batch_norm(net, cfg.model.ghost_batch_size)
    net.load_state_dict(weights)
    if idx.kind == "text":
        return net.eval()
    mean = cfg.preprocess.mean or [0.5] * idx.channels  # train/evaluate.py Normalizer's defaults
    std = cfg.preprocess.std or [0.25] * idx.channels
    return Normalized(net, mean, std).eval()


def _side(cfg: PipelineConfig, idx: SourceIndex) -> int | None:
    from echoray.data.op_shapes import output_size

    return output_size(idx.image_size, cfg.preprocess.augment.ops) if idx.image_size else None


def input_example(cfg: PipelineConfig, idx: SourceIndex) -> np.ndarray:
    """Two rows as the model takes them: held-out images (centre crops at the model's side),
    or token ids of source.seq_len."""
    if idx.kind == "text":
        n = cfg.source.seq_len
        return (np.arange(2 * n, dtype=np.int64) % idx.num_classes).reshape(2, n)
    from echoray.data.sources import open_reader

    ids = np.resize(idx.eval_ids[:2], 2)  # two rows: a batch dimension the export keeps dynamic
    images, _ = open_reader(idx).read(ids, "eval")
    side = _side(cfg, idx)
    if side and images.shape[1] > side:
        top, left = (images.shape[1] - side) // 2, (images.shape[2] - side) // 2
        images = images[:, top:top + side, left:left + side]
    return np.ascontiguousarray(images)


def log_trained_model(cfg: PipelineConfig, idx: SourceIndex, logger, run_dir: Path,
                      trained: tuple[dict[str, Any], float] | None) -> str | None:
    """Log the run's model; its `models:/` URI, or None when there is none to log.
    `logger`: the run's tracking.RunLogger; `trained`: (the weights rank 0 ended with, their
    epoch), from the run's collector (runtime/collector.py take_model)."""
    if trained is None:
        say("MLflow: no model logged: rank 0 sent no final weights")
        return None
    weights, epoch = trained
    model = served_model(cfg, idx, weights)
    register = cfg.tracking.register_model if not _is_trial(logger) else None
    tokenizer = run_dir / "tokenizer.json"
    try:
        return save_to_run(model, input_example(cfg, idx), logger, register,
                           extra_files=[str(tokenizer)] if tokenizer.is_file() else None,
                           tags={"echoray.epoch": str(epoch)})
    except Exception as exc:  # noqa: BLE001 - e.g. a user's model torch.export cannot trace: the run stands
        say(f"MLflow: the model could not be logged ({type(exc).__name__}: {str(exc)[:300]})")
        return None


def _is_trial(logger) -> bool:
    return "mlflow.parentRunId" in logger.client.get_run(logger.run_id).data.tags


def save_to_run(model, example: np.ndarray, logger, register: str | None, extra_files=None,
                tags: dict[str, str] | None = None) -> str:
    """mlflow.pytorch.log_model into the logger's run, with its signature and example; the
    requirements are named (torch, mlflow) rather than inferred in a subprocess."""
    import mlflow
    import mlflow.pytorch
    import torch
    from mlflow.models import infer_signature

    with torch.no_grad():
        out = model(torch.from_numpy(example)).numpy()
    mlflow.set_tracking_uri(logger.uri)
    # made here, in the run's experiment: log_model alone would make it in the fluent API's
    # active experiment (Default), where the run page does not look for it
    made = logger.client.create_logged_model(logger.experiment_id, name=MODEL_NAME, source_run_id=logger.run_id,
                                             tags=tags)
    info = mlflow.pytorch.log_model(
        model, name=MODEL_NAME, run_id=logger.run_id, model_id=made.model_id, input_example=example,
        signature=infer_signature(example, out), extra_files=extra_files, registered_model_name=register,
        pip_requirements=[f"torch=={torch.__version__.split('+')[0]}", f"mlflow=={mlflow.__version__}"],
        serialization_format="pt2")
    return info.model_uri


def register_best_trial(uri: str, run_id: str | None, name: str | None) -> str | None:
    """Register the model a search's best trial logged under `name` (tracking.register_model);
    the new version's number, or None (no name, no best trial, or it logged no model)."""
    if not name or not run_id:
        return None
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    outputs = client.get_run(run_id).outputs
    models = outputs.model_outputs if outputs else []
    if not models:
        return None
    if not client.search_registered_models(filter_string=f"name = '{name}'"):
        client.create_registered_model(name)
    version = client.create_model_version(name, f"models:/{models[-1].model_id}", run_id=run_id,
                                          model_id=models[-1].model_id)
    return str(version.version)
