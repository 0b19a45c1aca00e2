"""The `summary.json` contract of DESIGN.md, built from what the run measured."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from echoray.config import PipelineConfig
from echoray.metrics import metric_named


def build_summary(
    cfg: PipelineConfig,
    *,
    pipeline: str,
    run_dir: Path,
    mlflow_run_id: str,
    mlflow_uri: str,
    final: dict[str, Any],
    collected: dict[str, Any],
    t0: float,
    t_end: float,
) -> dict[str, Any]:
    fresh, trained = final["fresh_examples"], final["trained_examples"]
    samples = final.get("trained_samples", trained)  # absent from records written before it existed
    first = collected.get("first_step_at")
    return {
        "pipeline": pipeline,
        "run_dir": str(run_dir.resolve()),
        "mlflow_run_id": mlflow_run_id,
        "mlflow_tracking_uri": mlflow_uri,
        "echo": {
            "stage": cfg.echo.stage,
            "factor": cfg.echo.factor,
            "measured_factor": samples / fresh if fresh else None,  # sample units: BA views are not echo
            "final_factor": collected.get("echo_factor"),
            "shuffle_buffer": cfg.echo.shuffle_buffer,
            "duplicate_batch_fraction": final.get("duplicate_batch_fraction"),
            # samples trained as extra copies while no fresh batch was ready (echo.fill_waits)
            "extra_copies": final.get("extra_copies", 0),
        },
        "batch_augmentation": batch_augmentation_summary(cfg, trained, samples, final["steps"]),
        "workers": final["world_size"],
        "epochs": final["epochs"],  # passes of fresh data (fresh_examples / training examples: echoray/epochs.py)
        "evaluations": final["evaluations"],  # held-out scorings: train.evals_per_epoch per epoch, one at the end
        "evals_per_epoch": cfg.train.evals_per_epoch,
        "steps": final["steps"],
        "fresh_examples": fresh,
        "trained_examples": trained,
        "trained_samples": samples,
        "source_reads": collected["source_reads"],
        "metric": {"name": cfg.train.metric, "value": final.get("last_metric", final["last_accuracy"]),
                   "target": cfg.train.target, "direction": metric_named(cfg.train.metric).direction},
        "best_metric": final.get("best_metric", final["best_accuracy"]),
        "stop_reason": final["stop_reason"],
        **_to_target(final.get("to_target"), t0),
        # what the source had read when the first step ran (read during worker start-up)
        "source_reads_before_first_step": collected.get("reads_at_first_step"),
        "time_to_first_read_s": (collected["first_read_at"] - t0) if collected.get("first_read_at") else None,
        "time_to_first_step_s": (first - t0) if first else None,
        "wall_s": t_end - t0,
        **_loop_times(final),
        "upstream_examples_per_s": collected.get("upstream_examples_per_s"),
        "downstream_examples_per_s": collected.get("downstream_examples_per_s"),
        "measured_R": collected.get("measured_R"),
        "device": final.get("device"),
        "peak_device_bytes": final.get("peak_device_bytes"),  # rank 0's GPU memory peak (None on CPU)
        **({"text": collected["text"]} if collected.get("text") else {}),  # data/text/run_files.py
    }


def _loop_times(final: dict[str, Any]) -> dict[str, Any]:
    """Where rank 0's training loop spent its time: in all, in evaluations, waiting for its
    next batch (the input pipeline), in its steps."""
    return {"train_loop_s": final.get("loop_s"), "eval_s": final.get("eval_s"),
            "input_wait_s": final.get("wait_s"), "step_s": final.get("step_s")}


def _to_target(hit: dict[str, Any] | None, t0: float) -> dict[str, Any]:
    """The target's figures (None each where the run did not reach it)."""
    return {
        "target_reached": hit is not None,
        "fresh_examples_to_target": hit["fresh_examples"] if hit else None,
        "steps_to_target": hit["step"] if hit else None,
        "time_to_target_s": (hit["time"] - t0) if hit else None,
        "train_time_to_target_s": hit["train_s"] if hit else None,
    }


def batch_augmentation_summary(cfg: PipelineConfig, trained: int, samples: int, steps: int) -> dict[str, Any]:
    """Measured views: per sample (M in both modes) and per optimizer step over all workers
    (local: W x B x M rows; grouped: W x B rows, W/M groups x M members)."""
    ba = cfg.batch_augmentation
    return {"copies": ba.copies, "mode": ba.mode,
            "views_per_sample": trained / samples if samples else None,
            "views_per_step": trained / steps if steps else None,
            "samples_per_step": samples / steps if steps else None}


def fault_summary(collected: dict[str, Any], resumes: list[dict[str, Any]]) -> dict[str, Any]:
    """Worker-group restarts and driver resumes (each with when training went on again),
    worker failures Ray Train saw, training files skipped as undecodable."""
    starts = [{k: r[k] for k in ("from_epoch", "restored_at", "first_step_at")}
              for r in collected.get("recoveries", []) if r["kind"] == "restart"]
    resumed = [r for r in collected.get("recoveries", []) if r["kind"] == "resume"]
    if resumes and resumed:  # this driver's resume: when its workers trained again
        resumes[-1]["first_step_at"] = resumed[0]["first_step_at"]
    return {
        "worker_group_restarts": starts,
        "worker_failures": collected.get("failures", []),
        "driver_resumes": resumes,
        "skipped_bad_examples": collected.get("bad_examples", 0),
        "skipped_bad_files": collected.get("bad_files", []),
    }


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write to a temp file and rename, so a reader never sees half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str))
    os.replace(tmp, path)
