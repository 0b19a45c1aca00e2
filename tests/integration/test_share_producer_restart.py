"""The shared stream's producer pool (tune/share_producer.py) survives a preprocessing
actor's process dying mid-stream: Ray restarts the actor and retries its calls in flight
(max_restarts and max_task_retries -1), and the hub still gets every row of the read
plan exactly once, in plan order. Digits behind the emulated store (200 ms per call), so
the killed actor has calls in flight when it dies."""

import os
import signal
from pathlib import Path

import numpy as np
import ray

from echoray.config_load import load_config
from echoray.data.sources import index_source
from echoray.tune.share_hub import plan_blocks, producer_pool

EPOCHS = 2
PIPELINE = Path(__file__).parents[2] / "pipelines" / "digits_search.yaml"


def test_a_killed_actor_is_restarted_and_no_row_is_lost_or_repeated(local_ray):
    cfg = load_config(PIPELINE, ["preprocess.actors.min_size=2", "preprocess.actors.max_size=2",
                                 "preprocess.actors.num_cpus=0.25", "source.remote={latency_ms: 200}"])
    idx = index_source(cfg.source)
    expected = [(int(e), int(idx.train_ids[c])) for b in plan_blocks(cfg, idx, EPOCHS)
                for e, c in zip(b["epoch"], b["chunk"], strict=True)]
    pool = producer_pool(cfg, idx, EPOCHS)
    pid = lambda actor: ray.get(actor.__ray_call__.remote(lambda self: os.getpid()))  # noqa: E731
    victim = pid(pool.actors[0])
    got: list[tuple[int, int]] = []
    in_flight_at_kill = None
    try:
        while (item := pool.next()) is not None:
            record, ref = item
            rows = ray.get(ref)
            assert record.rows == len(rows["sample_id"])
            got += list(zip(rows["epoch"].tolist(), rows["sample_id"].tolist(), strict=True))
            if in_flight_at_kill is None:
                in_flight_at_kill = pool.in_flight[0]
                os.kill(victim, signal.SIGKILL)
        restarted = pid(pool.actors[0])
    finally:
        pool.close()
    assert in_flight_at_kill >= 1  # it died with work queued
    assert restarted != victim  # a new process took the actor's place
    assert got == expected  # every plan row once, in plan order
    assert len(expected) == EPOCHS * len(idx.train_ids) == len(set(expected))
    assert np.array_equal(np.unique([i for _, i in got]), np.sort(idx.train_ids))
