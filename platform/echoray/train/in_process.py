"""A one-worker run trained inside the calling process: the warm path of a search trial.

A Tune trial that drives a Ray Train fit starts a controller, a worker group, a
DatasetManager and a SplitCoordinator, each in a fresh Python process that imports
Ray Train (and torch) anew: 30-50 s per digits trial at concurrency 2 on 2 cores,
for 5 s of training (benchmarks/tune_overhead.py). Tune reuses its trial actors
(`reuse_actors`), so a trial that trains in its own actor finds torch, the model
code and Ray Data imported by the trial before it; only the preprocessing actor
pool starts per trial.

The same WorkerLoop runs, on the same Ray Data stream (data/pipeline.py), reporting
to the same RunCollector through a CollectorLink: seeds, fresh-example accounting,
the audit and the epoch events are those of a one-worker Ray Train run. What it does
not have is Ray Train's fault tolerance: no checkpoints and no worker restarts, so
only runs with `scaling.max_failures: 0` on one CPU worker take this path
(`trains_in_process`), and a trial is rerun whole after an interrupt (as today).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from echoray.config import PipelineConfig
from echoray.data.sources import SourceIndex
from echoray.train.early_stream import StartedStream, batch_stream


def trains_in_process(cfg: PipelineConfig, use_gpu: bool) -> bool:
    """One CPU worker, no restarts, local batch augmentation: nothing Ray Train adds is used."""
    return (cfg.scaling.num_workers == 1 and cfg.scaling.max_failures == 0 and not use_gpu
            and cfg.batch_augmentation.mode == "local")


def in_process_fit(cfg: PipelineConfig, idx: SourceIndex, collector) -> Callable[[], None]:
    """`fit` for runtime/monitor.watch_fit: the worker loop of rank 0 of 1, in this process."""

    def fit() -> None:
        try:
            _train(cfg, idx, collector)
        except Exception as exc:
            from echoray.train.faults import report_fatal

            report_fatal(collector, exc)  # as train/entry.py does for a Ray Train worker
            raise

    return fit


def _train(cfg: PipelineConfig, idx: SourceIndex, collector) -> None:
    from echoray.data.op_shapes import output_size
    from echoray.train.evaluate import EvalSet
    from echoray.train.loop import WorkerEnv, WorkerLoop
    from echoray.train.worker_link import Collectives, CollectorLink

    link = CollectorLink(collector)
    ba = cfg.batch_augmentation
    evaluator = EvalSet(idx, 0, 1, output_size(idx.image_size, cfg.preprocess.augment.ops),
                        tta=(cfg.seed, ba.tta_views, cfg.preprocess.augment.ops) if ba.tta_views else None)
    env = WorkerEnv(0, 1, "cpu", link, Collectives.single(), lambda model: model, evaluator)
    loop = WorkerLoop(cfg, env, n_train=len(idx.train_ids), channels=idx.channels,
                      num_classes=idx.num_classes, image_size=idx.image_size)
    # the preprocessing actor starts while the collector's process and the model do
    batches = StartedStream(_stream(cfg, idx, collector, loop.group))
    try:
        if link.ask("is_aborted"):  # the collector's process has started meanwhile
            return
        loop.setup()
        loop.run(batches)
    finally:
        batches.close()


def _stream(cfg: PipelineConfig, idx: SourceIndex, collector, group: int) -> Iterable[dict]:
    """The batches a one-worker Ray Train run reads from its dataset shard (train/loop.py)."""
    from echoray.data.pipeline import build_train_dataset
    from echoray.runtime.session import quiet_data

    quiet_data()
    ds = build_train_dataset(cfg, idx, collector)
    ds.context.execution_options.preserve_order = cfg.preprocess.deterministic  # as train/trainer.py asks
    return batch_stream(ds, cfg, group)
