"""When a run trains in Ray Train's local mode: the train function in the calling process."""

from __future__ import annotations

from echoray.config import PipelineConfig


def fits_local_mode(cfg: PipelineConfig, use_gpu: bool) -> bool:
    """One CPU worker, no restarts, local batch augmentation: nothing a worker group adds is used
    (Ray Train's local mode restarts nothing and splits no dataset among workers)."""
    return (cfg.scaling.max_workers == 1 and cfg.scaling.max_failures == 0 and not use_gpu
            and cfg.batch_augmentation.mode == "local")
