"""The function handed to Ray Train. Ray's controller unpickles it by reference,
so this module stays import-light; torch and the loop load in the workers only."""

from __future__ import annotations


def train_loop_per_worker(config: dict) -> None:
    try:
        from echoray.train.early_stream import start_worker_stream

        started = start_worker_stream(config)  # before torch: Ray Data starts meanwhile
        from echoray.runtime.node_metrics import watching_node
        from echoray.worker.ray_worker import run_worker

        with watching_node(config.get("tracking")):  # a node other than the driver's: its system metrics
            run_worker(config, started)
    except Exception as exc:
        from echoray.recovery.faults import report_fatal

        report_fatal(config["collector"], exc)  # bad data: no retry would help
        raise


def train_loop_local(config: dict) -> None:
    """The same function in Ray Train's local mode (train/local_fit.py): what this process
    held before the run is left out of the garbage collector's scans (`gc.freeze`: the
    imports, and in a reused Tune trial actor the trials before), and the stream's threads
    end before the function returns."""
    import gc

    from echoray.train.local_fit import settle_stream

    gc.freeze()
    try:
        train_loop_per_worker(config)
    finally:
        settle_stream()
