"""A one-worker run trained inside the calling process: the warm path of a search trial.

A Tune trial that drives a Ray Train fit starts a controller, a worker group, a
DatasetManager and a SplitCoordinator, each in a fresh Python process that imports
Ray Train (and torch) anew: 30-50 s per digits trial at concurrency 2 on 2 cores,
for 5 s of training (benchmarks/tune_overhead.py). Tune reuses its trial actors
(`reuse_actors`), so a trial that trains in its own actor finds torch, the model
code and Ray Data imported by the trial before it; only the preprocessing actor
pool starts per trial.

`echoray train` takes the same path for a run on a local Ray it started itself
(`scaling.in_process: auto`, the default): on this 2-core machine the default digits run
reached its first step 10.8 s after the command started instead of 22.0 s, and the
command ended after 17.9 s instead of 29.5 s (medians of 3, benchmarks/startup.py
--trainers auto false, docs/benchmarks/startup.md).

The same WorkerLoop runs, on the same Ray Data stream (data/pipeline.py), reporting
to the same RunCollector through a CollectorLink (a search trial on a shared stream: to
its collector in this process, runtime/local_collector.py): seeds, fresh-example accounting,
the audit and the epoch events are those of a one-worker Ray Train run. What it does
not have is Ray Train's worker restarts, so only runs with `scaling.max_failures: 0`
on one CPU worker take this path (`trains_in_process`). A CLI run keeps checkpoints
in its storage (train/checkpoint_store.py) and `echoray train --resume` continues it
in process from the latest; a search trial keeps none and is rerun whole after an
interrupt.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from echoray.config import PipelineConfig
from echoray.data.sources import SourceIndex
from echoray.train.early_stream import StartedStream


def trains_in_process(cfg: PipelineConfig, use_gpu: bool) -> bool:
    """One CPU worker, no restarts, local batch augmentation: nothing Ray Train adds is used."""
    return (cfg.scaling.num_workers == 1 and cfg.scaling.max_failures == 0 and not use_gpu
            and cfg.batch_augmentation.mode == "local")


def in_process_fit(cfg: PipelineConfig, idx: SourceIndex, collector, store=None,
                   checkpoint=None, shared=None) -> Callable[[], None]:
    """`fit` for runtime/monitor.watch_fit: the worker loop of rank 0 of 1, in this process.
    `store`: a CheckpointStore to keep checkpoints in (None: none); `checkpoint`: the one
    to continue from (a resumed run); `shared`: a search's shared stream to read
    (tune/share_consumer.py SharedStream) instead of a stream of its own."""

    def fit() -> None:
        _freeze_heap()
        try:
            _train(cfg, idx, collector, store, checkpoint, shared)
        except Exception as exc:
            from echoray.train.faults import report_fatal

            report_fatal(collector, exc)  # as train/entry.py does for a Ray Train worker
            raise
        finally:
            _settle_stream()

    return fit


def _freeze_heap() -> None:
    """Leave what this process holds before the run out of the cyclic garbage collector's
    scans (`gc.freeze`): the imports of torch, Ray, Tune and MLflow, and in a reused search
    trial's actor what the trials before it kept. A full collection then scans only what
    the run made. Objects frozen are still freed when their last reference goes; only a
    reference cycle among them would outlive its use, and the run before this one ended
    with a full collection (_settle_stream).

    Measured: in a search trial's process (benchmarks/shared_stream.py, py-spy at 40 Hz)
    _settle_stream's two full collections were 3-5% of its busy time. In one `echoray
    train` of that benchmark's pipeline (one epoch, in process), they took 0.71-0.80 CPU-s
    over 700,000 objects, and 0.14-0.16 s frozen; all the run's collections 2.4-2.6 s, and
    1.65-1.69 s frozen (two runs each)."""
    gc.freeze()


def _settle_stream(timeout_s: float = 5.0) -> None:
    """Let a closed stream's Ray Data threads end while Ray is still up. A stream closed at
    the target leaves its `iter_threaded` workers blocked in a pull from the executor, and
    its objects in reference cycles; when the CLI then shut Ray down, one of them called
    into the dead core worker, which ended the process with exit code 1 ("The core
    worker has already been shutdown", 2 of 3 default runs). The pulls return within a
    block's time (the executor is still running); collecting then shuts the executor down.
    The thread name is Ray Data's own: Ray 2.60's DataIterator has no close() that would
    end them (added upstream by ray-project/ray#62949)."""
    gc.collect()  # an interrupted stream's generators in cycles: collecting sets their stop events
    deadline = time.monotonic() + timeout_s
    for t in threading.enumerate():
        if t.name == "iter_threaded":  # ray/data/_internal/block_batching/util.py
            t.join(max(0.0, deadline - time.monotonic()))
    gc.collect()


def _train(cfg: PipelineConfig, idx: SourceIndex, collector, store, ckpt, shared=None) -> None:
    import torch

    from echoray.echo_plan import EchoPlan
    from echoray.train.assembly import WorkerSite, build_loop, restore_and_keep
    from echoray.train.checkpoint import read_replay
    from echoray.train.lm_eval import make_evaluator
    from echoray.train.worker_link import Collectives, link_to

    # The threads a Ray Train worker of this plan gets (OMP_NUM_THREADS from its CPUs): the
    # same arithmetic, and the preprocessing actor keeps the CPU the plan gives it.
    torch.set_num_threads(max(1, int(cfg.scaling.cpus_per_worker)))
    first_epoch, consumed = read_replay(ckpt) if ckpt is not None else (0, None)
    # The Dataset is built and the preprocessing actors start first, in the stream's thread,
    # while the collector's process, the held-out set and the model do. Rank 0 of 1 in local
    # batch augmentation (trains_in_process): group 0, and it reads. A shared stream is
    # running already, and is attached to at the first batch (not before).
    batches = (shared.batches(cfg, 0, len(idx.train_ids)) if shared is not None
               else StartedStream(_built(lambda: _stream(cfg, idx, collector, 0, first_epoch, consumed))))
    try:
        link = link_to(collector)  # direct calls where the collector is in this process
        from echoray.runtime import stop

        site = WorkerSite(0, 1, "cpu", link, Collectives.single(), lambda model: model, should_stop=stop.requested)
        # A shared stream's trials score one held-out set, decoded once by its hub.
        evaluator = make_evaluator(cfg, idx, 0, 1, decoded_by=shared.held_out) if shared is not None else None
        loop = build_loop(cfg, idx, site, evaluator, plan=EchoPlan.from_config(cfg, shared_stream=shared is not None))
        if link.ask("is_aborted"):  # the collector's process has started meanwhile
            return
        loop.setup()

        def keep(metrics: dict, local_dir) -> None:  # then epochs up to it are final
            link.ask("committed", store.save(metrics, local_dir), metrics)

        restore_and_keep(loop, cfg, idx, ckpt, collector, keep=store is not None, sink=keep)
        stopped = loop.train(loop.input_batches(batches if loop.reads else None))
        if shared is not None:  # the others stop waiting for it before its last evaluation
            shared.release("target or budget reached" if stopped else "read its train.max_epochs of rows")
        loop.finish(stopped)
    finally:
        batches.close()
        if shared is not None:
            shared.release("the run failed or was stopped")


def _built(make: Callable[[], Iterable[dict]]) -> Iterator[dict]:
    """The batches of make()'s stream, make() called at the first next(): in StartedStream's
    thread, so building the Dataset (a 40-epoch plan is hundreds of blocks) overlaps too."""
    yield from make()


def _stream(cfg: PipelineConfig, idx: SourceIndex, collector, group: int, first_epoch: int = 0,
            consumed=None) -> Iterable[dict]:
    """The batches a one-worker Ray Train run reads from its dataset shard (train/loop.py),
    with a head start where one applies (data/head_start.py)."""
    from echoray.runtime.session import quiet_data
    from echoray.train.early_stream import head_started

    quiet_data()
    return head_started(cfg, idx, collector, first_epoch, consumed, group)
