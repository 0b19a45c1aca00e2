"""A process that SIGTERMs itself at random moments of real training, without Ray.

`python stop_harness.py ROUNDS SEED`: each round trains a real WorkerLoop (digits,
in-memory batches of the real preprocessing) in the real fit thread of
driver/monitor.watch_fit, with the CLI's SIGTERM handling (driver/signals.py); a timer
thread sends SIGTERM to this process at a random moment of the round. After each round
one JSON line says how it ended. The last round's interrupt is not caught: it leaves the
way `echoray` does (driver/stop.exit_now with 143), so the caller checks the exit code.
Only `ray.get` is replaced (the collector is a plain object here).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time

import torch

import echoray.driver.monitor as monitor
from echoray.config_load import load_config
from echoray.data.shuffle_buffer import shuffled_batches
from echoray.data.sources import index_source
from echoray.driver import stop
from echoray.driver.signals import Terminated, sigterm_interrupts
from echoray.recovery.faults import RunAborted
from echoray.runtime.resources import plan_resources
from echoray.train.local_run import local_loop, preprocessed_blocks

torch.set_num_threads(1)
OVERRIDES = ["train.target=null", "source.limit=256", "train.max_epochs=6", "train.batch_size=32",
             "model.width=8", "train.checkpoint_every=0", "scaling.use_gpu=false"]


class _Ray:  # monitor's `ray.get` on the plain collector below
    @staticmethod
    def get(value, **_):
        return value


class _Poll:
    def __init__(self, owner):
        self.owner = owner

    def remote(self, *_args):
        return {"tick": None, "echo_factor": 1.0, "events": [], "final_events": [], "factor_history": [],
                "recoveries": [], "fatal": None, "last_progress": time.time(), "final": None}


class Collector:
    def __init__(self):
        self.poll = _Poll(self)


def one_round(cfg, idx, blocks, delay_s: float) -> dict:
    """Train until the SIGTERM sent after `delay_s` (or the end, then wait for it); how
    the round ended: whether the loop stopped at a step (RunAborted) and was joined."""
    loop = local_loop(cfg, idx)
    loop.env.should_stop = stop.requested
    batches = shuffled_batches(iter(blocks), cfg.train.batch_size, 64, 7)
    outcome: dict = {"finished": False}

    def fit():
        try:
            outcome["returned"] = loop.train(loop.input_batches(batches))
        except RunAborted:
            outcome["aborted_at_step"] = loop.state.counters.steps
            raise
        except BaseException as exc:
            outcome["error"] = repr(exc)
            raise

    try:  # the timer starts inside: a SIGTERM at a delay near 0 may land before watch_fit
        threading.Timer(delay_s, os.kill, (os.getpid(), signal.SIGTERM)).start()
        monitor.watch_fit(fit, Collector(), plan_resources(cfg, False), 600, lambda ev: None, poll_s=0.01)
        outcome["finished"] = True
        while True:  # the timer's SIGTERM ends the wait
            time.sleep(1)
    except Terminated as exc:
        outcome["exit_code"] = exc.exit_code
    outcome["joined"] = monitor.join_fit(60)
    outcome["steps"] = loop.state.counters.steps
    return outcome


def main(rounds: int, seed: int) -> int:
    """`rounds` rounds; the last one's interrupt ends the process as the CLI's does."""
    monitor.ray = _Ray
    cfg = load_config(None, OVERRIDES)
    idx = index_source(cfg.source)
    blocks = list(preprocessed_blocks(cfg, idx))
    rng = random.Random(seed)
    with sigterm_interrupts():
        for _ in range(rounds):
            result = one_round(cfg, idx, blocks, rng.uniform(0.0, 0.8))
            print(json.dumps(result), flush=True)
    return result["exit_code"]


if __name__ == "__main__":
    stop.exit_now(main(int(sys.argv[1]), int(sys.argv[2])))
