"""The Ray Train side of a worker: the Ray pieces around a WorkerLoop (train/loop.py), in a
worker group or in Ray Train's local mode (train/local_fit.py says what local mode adds)."""

from __future__ import annotations

import torch

from echoray.config import PipelineConfig
from echoray.train.early_stream import StartedStream, batch_stream
from echoray.worker.assembly import WorkerSite
from echoray.worker.link import Collectives


def run_worker(config: dict, started=None) -> None:
    """Ray Train's per-worker function: the Ray pieces around a WorkerLoop. `started`: this
    worker's shard stream, already asked for its first batch (train/early_stream.py). In
    local mode (config["local_mode"]) the pieces train/local_fit.py adds."""
    import ray.train

    from echoray.recovery import checkpoint
    from echoray.worker.assembly import build_loop, restore_and_keep
    from echoray.worker.link import CollectorLink

    checkpoint.quiet_report_log()
    cfg = PipelineConfig.model_validate(config["cfg"])
    idx, link = config["index"], CollectorLink(config["collector"])
    if link.ask("is_aborted"):
        if started is not None:
            started.close()
        return  # a worker group restarted after the driver gave up: end the fit at once
    local = config.get("local_mode")
    site = _local_site(link) if local else _group_site(link)
    loop = build_loop(cfg, idx, site)
    if local:
        torch.set_num_threads(max(1, int(cfg.scaling.cpus_per_worker)))  # as OMP_NUM_THREADS in a worker
    loop.setup()
    if local:
        from echoray.train.local_fit import checkpoint_sink

        keep, sink = checkpoint_sink(cfg, local["storage"], link)
        restore_and_keep(loop, cfg, idx, local["restore"], config["collector"], keep=keep, sink=sink)
    else:
        restore_and_keep(loop, cfg, idx, ray.train.get_checkpoint(), config["collector"])
    source = None
    if loop.reads:
        source = started or StartedStream(batch_stream(ray.train.get_dataset_shard("train"), cfg, loop.group))
    try:
        final = loop.finish(loop.train(loop.input_batches(source)))
    finally:
        if local and source is not None:  # the process goes on: its stream must not
            source.close()  # before the hand-over below, which waited on a still-running stream
    if final is not None:  # rank 0: the weights it ended with, for the run's MLflow model
        link.ask("keep_model", checkpoint.final_weights(loop.model), final.epochs)


def _group_site(link) -> WorkerSite:
    """A worker of a group: its rank, its device, DDP around the model."""
    import ray.train
    import ray.train.torch

    ctx = ray.train.get_context()
    return WorkerSite(ctx.get_world_rank(), ctx.get_world_size(), ray.train.torch.get_device(), link,
                      Collectives.torch_distributed(), ray.train.torch.prepare_model)


def _local_site(link) -> WorkerSite:
    """Local mode: rank 0 of 1 on the CPU (train/local_mode.py), the model as it is, the stop
    flag of this process. Not ray.train.get_context() and friends: inside a Tune trial (a
    warm trial) Ray 2.60 refuses them as deprecated in a Tune session."""
    from echoray.driver import stop

    return WorkerSite(0, 1, torch.device("cpu"), link, Collectives.single(), lambda model: model,
                      should_stop=stop.requested)
