"""Which epoch records the driver takes as final (runtime/collector.py), without Ray: the
actor's own class, called in the order a worker group, Ray Train's controller and the
driver's poll call it.

The case pinned here made tests/integration/test_worker_failure.py flaky: the target was
reached at epoch 3, rank 0 sent its epoch 3 record and its `finish`, and was SIGKILLed
before Ray Train saw its function return. Ray Train restarted the worker group from the
checkpoint of epoch 2 and the replay trained other samples in epoch 3 (fresh 4383), but
the driver had already taken the killed attempt's epoch 3 (fresh 4389) as final."""

import numpy as np

from echoray.records import Heartbeat
from echoray.runtime.collector import RunCollector

Collector = RunCollector.__ray_actor_class__  # the plain class behind the actor
SPE = 33


class Ckpt:
    def __init__(self, epoch: int):
        self.path = f"s3://bucket/runs/run/train/checkpoint_{epoch}"


def record(epoch: int, fresh: int) -> dict:
    return {"epoch": epoch, "step": SPE * epoch, "fresh_examples": fresh}


def audit(steps: range) -> dict:
    return {"step": np.asarray(list(steps), dtype=np.int64)}


def final_fresh(c, since: int = 0, ended: bool = False) -> list[int]:
    return [ev["fresh_examples"] for ev in c.poll(0, 0, since, ended)["final_events"]]


def first_attempt_to_target(c) -> None:
    """Epochs 1 and 2 checkpointed, the target reached at epoch 3 (no checkpoint), finish sent."""
    assert c.attempt_started(0, 0) is None
    for epoch, fresh in ((1, 1879), (2, 3264)):
        c.event(record(epoch, fresh))
        c.add_audit(audit(range(SPE * (epoch - 1), SPE * epoch)))
        c.committed(Ckpt(epoch), {"epoch": epoch, "steps": SPE * epoch})
    c.event(record(3, 4389))
    c.add_audit(audit(range(2 * SPE, 3 * SPE)))
    c.finish({"epochs": 3, "fresh_examples": 4389})


def test_a_finish_does_not_make_epochs_after_the_checkpoint_final():
    c = Collector(1.5, checkpointed=True)
    first_attempt_to_target(c)
    # The worker may still die before Ray Train sees it return: epoch 3 is not final yet.
    assert final_fresh(c) == [1879, 3264]
    # It died: the group restarts from the checkpoint of epoch 2 and trains epoch 3 again.
    assert c.attempt_started(2, 2 * SPE) == Ckpt(2).path
    assert c.poll(0)["final"] is None  # the killed attempt's final record is dropped
    assert final_fresh(c, since=2) == []
    c.event(record(3, 4383))
    c.add_audit(audit(range(2 * SPE, 3 * SPE)))
    c.finish({"epochs": 3, "fresh_examples": 4383})
    assert final_fresh(c, since=2) == []
    # The fit returned: the replay's epoch 3 is final, once, and the audit holds its rows only.
    state = c.poll(0, 0, 2, ended=True)
    assert [ev["fresh_examples"] for ev in state["final_events"]] == [4383]
    assert state["final"] == {"epochs": 3, "fresh_examples": 4383}
    steps = np.concatenate([p["step"] for p in c.take_audit()])
    assert sorted(steps.tolist()) == list(range(3 * SPE))
    recoveries = state["recoveries"]
    assert [(r["kind"], r["from_epoch"], r["steps"]) for r in recoveries] == [("restart", 2, 2 * SPE)]


def test_an_unfailed_run_gets_every_epoch_once_when_the_fit_ends():
    c = Collector(1.5, checkpointed=True)
    first_attempt_to_target(c)
    assert final_fresh(c) == [1879, 3264]
    assert final_fresh(c, since=2, ended=True) == [4389]
    assert final_fresh(c, since=3, ended=True) == []


def test_without_checkpoints_every_event_is_final_at_once():
    # No restart can replay an epoch (a run trained in process): no wait for the fit's end.
    c = Collector(1.0, checkpointed=False)
    c.attempt_started(0, 0)
    c.event(record(1, 1438))
    assert final_fresh(c) == [1438]
    c.event(record(2, 2876))
    c.finish({"epochs": 2})
    assert final_fresh(c, since=1) == [2876]


def test_a_restarted_group_drops_the_earlier_groups_heartbeats():
    """Two workers, then one (an elastic group shrunk after checkpoint 1): the progress tick
    is the new group's, not the new rank 0's restored counts plus the lost rank 1's."""
    c = Collector(1.0, checkpointed=True)
    c.attempt_started(0, 0)
    for rank in (0, 1):
        c.heartbeat(Heartbeat(rank=rank, steps=40, samples=1280, step_s=1.0, fresh=640))
    c.committed(Ckpt(1), {"epoch": 1, "steps": 20})
    c.attempt_started(1, 20)
    assert c.poll(0)["tick"] is None  # no worker of the new group has reported
    c.heartbeat(Heartbeat(rank=0, steps=30, samples=1600, step_s=1.0, fresh=960))  # restored 640 + 320
    tick = c.poll(0)["tick"]
    assert (tick["steps"], tick["trained"], tick["fresh"]) == (30, 1600, 960)
