"""runtime/epoch_ledger.py on its own (tests/unit/test_collector_final.py drives it through
the collector, in the order a worker group, Ray Train's controller and the driver call it)."""

import pytest

from echoray.runtime.epoch_ledger import EpochLedger

pytestmark = pytest.mark.unit


class Ckpt:
    def __init__(self, epoch: int):
        self.path = f"/runs/run/train/checkpoint_{epoch}"


def rec(epoch: int, fresh: int) -> dict:
    return {"epoch": epoch, "fresh_examples": fresh}


def fresh(records: list[dict]) -> list[int]:
    return [r["fresh_examples"] for r in records]


def test_checkpointed_epochs_are_final_in_order_and_a_restart_replaces_the_rest():
    ledger = EpochLedger(checkpointed=True)
    for e, f in ((1, 100), (2, 200), (3, 300)):
        ledger.add(rec(e, f))
    assert ledger.final_after(0) == []  # nothing checkpointed yet
    ledger.committed(Ckpt(2), {"epoch": 2, "steps": 20})
    assert fresh(ledger.final_after(0)) == [100, 200]
    assert fresh(ledger.final_after(1)) == [200]
    ledger.finish({"epochs": 3})
    assert ledger.restart_from(2) == Ckpt(2).path  # the group restarts from epoch 2's checkpoint
    assert ledger.final is None and sorted(ledger.by_epoch) == [1, 2]
    ledger.add(rec(3, 299))
    assert fresh(ledger.final_after(2)) == []  # epoch 3 could still be replayed
    assert fresh(ledger.final_after(2, ended=True)) == [299]  # the fit returned: it cannot
    assert fresh(ledger.events) == [100, 200, 300, 299]  # every record, replays too


def test_without_checkpoints_every_record_is_final_when_it_arrives_and_gaps_wait():
    ledger = EpochLedger(checkpointed=False)
    ledger.add(rec(1, 10))
    ledger.add(rec(3, 30))  # epoch 2's record has not landed yet
    assert fresh(ledger.final_after(0)) == [10]
    ledger.add(rec(2, 20))
    assert fresh(ledger.final_after(0)) == [10, 20, 30]
    assert ledger.restart_from(0) is None  # no checkpoint registered


def test_a_resumed_ledger_starts_final_at_its_checkpoint():
    ledger = EpochLedger.resumed(True, {"checkpoint": Ckpt(4), "epoch": 4, "steps": 40})
    assert ledger.final_epoch == 4 and ledger.restart_from(4) == Ckpt(4).path
    ledger.add(rec(5, 500))
    assert ledger.final_after(4) == []
    ledger.committed(Ckpt(5), {"epoch": 5, "steps": 50})
    assert fresh(ledger.final_after(4)) == [500]
