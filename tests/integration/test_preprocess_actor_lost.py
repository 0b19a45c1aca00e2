"""A preprocessing actor killed mid-run (SIGKILL of its process, as a crash, the OOM killer
or a lost node would end it): Ray Data restarts it and retries the call it was in (its
actor pools default to unlimited restarts and task retries), and the run finishes with
the counts of an unfailed run. Echo before augmentation at an integer factor (2) over
whole read-plan epochs makes those counts exact for any seed: every (epoch, sample)
trained twice, each copy once, every epoch complete. One actor (the default pool), so
the stream waits for the replacement: the console's progress lines say when training
goes on."""

import json
import os
import signal
import time

from fault_runs import (
    BATCH,
    COPIES,
    EPOCHS,
    N_TRAIN,
    Driver,
    alive_actors,
    assert_exact_counts,
    train_args,
)

from helpers import wait_for

STEPS = N_TRAIN * EPOCHS * COPIES // BATCH


def preprocess_actor_pids() -> list[int]:
    # Ray Data's actor-pool worker class (its class name, "_MapWorker", is Ray's choice).
    return [a.pid for a in alive_actors("MapWorker")]


def test_killed_preprocessing_actor_is_replaced_and_counts_stay_exact(local_ray, tmp_path, sqlite_uri):
    run = tmp_path / "run"
    # The slow store keeps the one actor busy for the whole run (reads are the bottleneck:
    # ~3 s a plan epoch), so the kill lands while it works and the stream waits for it.
    driver = Driver(train_args(sqlite_uri, run), tmp_path)
    _, step_at_kill = driver.wait_for_step(10)
    pids = wait_for(preprocess_actor_pids, "the preprocessing actor")
    assert len(pids) == 1, pids
    killed_at = time.time()
    os.kill(pids[0], signal.SIGKILL)
    # Training goes on (a step past the one seen at the kill): the restarted actor reads the rest.
    resumed_at, _ = driver.wait_for_step(step_at_kill + 1, since=killed_at)
    assert driver.finish() == 0, driver.output[-3000:]
    print(f"\npreprocessing actor killed at step >= {step_at_kill}: training again {resumed_at - killed_at:.1f} s "
          f"later (the driver polls every 0.5 s)")

    s = json.loads((run / "summary.json").read_text())
    assert s["epochs"] == EPOCHS and s["faults"]["worker_group_restarts"] == []
    assert_exact_counts(s, run, N_TRAIN, EPOCHS, COPIES, BATCH)
