"""An elastic worker group (`scaling.num_workers: [1, 2]`) resized mid-run: two Ray Train
workers, one on each node of a two-node cluster on this machine (each node holds one
`trainer_slot`); after the first checkpoint the second node is lost (its processes killed).
Ray Train restarts the group with the one worker the cluster still holds (its elastic
scaling policy counts the live nodes' resources) from the last checkpoint, which the
reshard path (recovery/reshard.py) splits for one worker; the run ends with the counts of an
unfailed run: every (epoch, sample) of every epoch trained exactly its echo copies, each
copy once, fresh = n_train x epochs."""

import json
import os
import re
import time

import pyarrow.parquet as pq
from fault_runs import Driver, assert_each_copy_once, assert_two_workers_then_one
from two_nodes import two_nodes

from helpers import wait_for

N_TRAIN, EPOCHS, BATCH, COPIES = 640, 3, 32, 2  # two workers: 20 steps of 2 x 32 an epoch; one: 40 of 32


def test_a_group_that_loses_a_node_goes_on_with_one_worker_and_exact_counts(tmp_path):
    run = tmp_path / "run"
    sets = [f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", f"source.limit={N_TRAIN}", f"train.batch_size={BATCH}",
            f"train.max_epochs={EPOCHS}", "train.target=null", "train.checkpoint_every=1",
            "echo.stage=before_augment", f"echo.factor={COPIES}", "audit.enabled=true", "train.log_every_s=0.3",
            "scaling.num_workers=[1, 2]", "scaling.cpus_per_worker=0.5", "scaling.max_failures=1",
            "scaling.resources_per_worker={trainer_slot: 1}", "preprocess.actors.resources={head_node: 1}",
            "train.storage_shared=true",  # two nodes of one machine: the run folder is theirs too
            "source.kind=slow_store:SlowStore", "source.options={inner: digits, latency_ms: 80}"]
    with two_nodes(head={"num_cpus": 2, "trainer_slot": 1, "head_node": 4}, second={"trainer_slot": 1}) as cluster:
        # A group start Ray Train tried before the lost node was marked dead gives up sooner.
        env = {**os.environ, "RAY_ADDRESS": cluster.address, "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "20"}
        d = Driver(["train", *(x for s in sets for x in ("--set", s)), "--out", str(run)], tmp_path, env=env)
        snapshot = run / "ray" / "train" / "checkpoint_manager_snapshot.json"  # Ray Train registered one
        wait_for(snapshot.is_file, "the first checkpoint", timeout_s=300)
        lost_at = time.time()
        cluster.lose_second()
        assert d.finish() == 0, d.output[-4000:]

    live = [int(f) for f in re.findall(r"\] +epoch .* fresh +(\d+) +trained", d.output)]
    assert live and max(live) <= N_TRAIN * EPOCHS, live  # the lost worker's heartbeats left the progress lines
    s = json.loads((run / "summary.json").read_text())
    restarts = s["faults"]["worker_group_restarts"]
    assert restarts and s["workers"] == 1, s["faults"]
    assert s["epochs"] == s["evaluations"] == EPOCHS
    assert s["fresh_examples"] == N_TRAIN * EPOCHS and s["trained_examples"] == N_TRAIN * EPOCHS * COPIES

    audit = pq.read_table(run / "audit.parquet").to_pydict()
    assert_each_copy_once(audit, N_TRAIN, EPOCHS, COPIES)
    # two workers up to the checkpoint the last restart began from, one after it
    at = next(h["step"] for h in s["history"] if h["evaluation"] == restarts[-1]["from_epoch"])
    assert at > 0
    after = assert_two_workers_then_one(audit, at, N_TRAIN * EPOCHS * COPIES, BATCH)
    assert s["steps"] == at + len(after) // BATCH
    print(f"node lost -> next step {restarts[-1]['first_step_at'] - lost_at:.1f} s; restarts {len(restarts)}, "
          f"from evaluation {restarts[-1]['from_epoch']}; fresh {s['fresh_examples']}, trained "
          f"{s['trained_examples']} (unfailed: {N_TRAIN * EPOCHS}, {N_TRAIN * EPOCHS * COPIES})")
