"""The typed records (echoray/records.py): their dict forms round-trip exactly, keep the
keys and order the driver, MLflow and earlier checkpoints use, and meta.json files written
by the code before the records existed are read as they were.

data/checkpoint_meta/ holds two real checkpoints' meta.json and rank_0.json, written by
earlier versions of this code on 1 Dec 2026: a Fashion-MNIST run at 09:38 (its epoch
records predate the `metric` key) and a text run at 09:49."""

import json
import shutil
from pathlib import Path

import pytest
from ray.train import Checkpoint

from echoray.accounting.loop_state import LoopState
from echoray.records import CheckpointMeta, EpochRecord, FinalRecord
from echoray.recovery.checkpoint import read_meta, read_replay

# An epoch record as train/loop.py sent it before the records existed (image run).
IMAGE_EVENT = {
    "epoch": 2, "data_epochs": 1.0, "step": 12, "accuracy": 0.75, "metric": 0.75, "loss": 1.25,
    "lr": 0.05, "accuracy_tta": None, "fresh_examples": 384, "trained_examples": 768,
    "trained_samples": 384, "duplicate_batch_fraction": 0.0, "elapsed_s": 3.5, "time": 1764590000.5,
    "train_s": 2.5, "wait_fraction": 0.125,
}
# ... and a language model's: three scores, and the fresh tokens after the trained samples.
TEXT_EVENT = {
    "epoch": 1, "data_epochs": 0.5, "step": 4, "eval_loss": 2.25, "perplexity": 9.5, "bits_per_byte": 3.25,
    "metric": 3.25, "loss": 2.25, "lr": 0.001, "accuracy_tta": None, "fresh_examples": 32, "trained_examples": 64,
    "trained_samples": 32, "fresh_tokens": 4096, "duplicate_batch_fraction": 0.0, "elapsed_s": 1.5,
    "time": 1764590001.0, "train_s": 1.0, "wait_fraction": 0.5,
}
# meta.json as recovery/faults.py Checkpointer.save wrote it at commit a22591d (json.dumps of its dict).
OLD_META_JSON = json.dumps({
    "epoch": 2, "steps": 12, "start_epoch": 1, "world_size": 2,
    "state": {"epoch": 2, "best": 0.75, "acc": 0.75, "to_target": IMAGE_EVENT, "reason": "target reached",
              "eval_step": 12, "eval_s": 0.5, "elapsed_s": 3.5, "train_s": 2.5},
    "history": [{**IMAGE_EVENT, "epoch": 1, "data_epochs": 0.5, "step": 6, "accuracy": 0.5, "metric": 0.5},
                IMAGE_EVENT],
    "saved_at": 1764590002.0, "echo_factor": 2.5,
})


@pytest.mark.parametrize("event", [IMAGE_EVENT, TEXT_EVENT], ids=["image", "text"])
def test_an_epoch_record_reads_and_writes_the_dict_it_was(event):
    record = EpochRecord.from_dict(event)
    assert record.scores == {k: event[k] for k in ("accuracy", "eval_loss", "perplexity", "bits_per_byte")
                             if k in event}
    assert record.fresh_tokens == event.get("fresh_tokens")
    assert list(record.to_dict().items()) == list(event.items())  # same keys, values and order
    assert EpochRecord.from_dict(record.to_dict()) == record


def test_an_epoch_record_without_a_later_key_keeps_it_absent_and_one_without_its_index_fails():
    old = {k: v for k, v in IMAGE_EVENT.items() if k not in ("metric", "trained_samples")}
    record = EpochRecord.from_dict(old)
    assert record.absent == {"metric", "trained_samples"} and record.metric is None
    assert list(record.to_dict().items()) == list(old.items())
    with pytest.raises(KeyError, match="'epoch'"):
        EpochRecord.from_dict({k: v for k, v in IMAGE_EVENT.items() if k != "epoch"})


def test_a_final_record_round_trips_with_its_target_record():
    final = FinalRecord(
        evals=2, epochs=1.0, steps=12, fresh_examples=384, trained_examples=768, trained_samples=384,
        best_accuracy=0.75, last_accuracy=0.75, best_metric=0.75, last_metric=0.75,
        to_target=EpochRecord.from_dict(IMAGE_EVENT), stop_reason="target reached", world_size=1,
        wait_s=0.25, step_s=2.0, device="cpu", duplicate_batch_fraction=0.0, loop_s=2.5, eval_s=0.5,
        precision="fp32", peak_device_bytes=None)
    d = final.to_dict()
    assert d["to_target"] == IMAGE_EVENT and d["steps"] == 12 and d["stop_reason"] == "target reached"
    assert (d["evaluations"], d["epochs"]) == (2, 1.0) and "evals" not in d  # the keys the summary reads
    assert FinalRecord.from_dict(json.loads(json.dumps(d))) == final
    assert FinalRecord.from_dict({**d, "to_target": None}).to_target is None


def test_checkpoint_meta_round_trips_through_json():
    meta = CheckpointMeta.from_dict(json.loads(OLD_META_JSON))
    again = CheckpointMeta.from_dict(json.loads(json.dumps(meta.to_dict())))
    assert again == meta and meta.to_dict() == json.loads(OLD_META_JSON)


def test_a_meta_json_written_before_the_records_is_read_by_every_reader(tmp_path):
    (tmp_path / "meta.json").write_text(OLD_META_JSON)
    ckpt = Checkpoint.from_directory(str(tmp_path))
    meta = read_meta(ckpt)
    assert (meta.evals, meta.steps, meta.first_open_pass, meta.world_size, meta.echo_factor) == (2, 12, 1, 2, 2.5)
    assert [r.eval_index for r in meta.history] == [1, 2] and [r.metric for r in meta.history] == [0.5, 0.75]
    assert meta.history[1].to_dict() == IMAGE_EVENT
    assert read_replay(ckpt) == (1, {})
    # the loop's run part, with the record that reached the target, comes back as it was saved
    rank_part = LoopState().to_checkpoint()[1]
    state = LoopState.from_checkpoint(meta.state, rank_part)
    assert state.to_target == EpochRecord.from_dict(IMAGE_EVENT) and state.reason == "target reached"
    # ... with the schedule's start that checkpoints of earlier versions lack (a run's start)
    assert state.to_checkpoint()[0] == {**json.loads(OLD_META_JSON)["state"], "lr_from": [0, 0.0]}


DATA = Path(__file__).parent / "data" / "checkpoint_meta"


@pytest.mark.parametrize("run", ["fashion_mnist", "text"])
def test_real_checkpoints_of_earlier_versions_restore_as_they_were(tmp_path, run):
    raw = json.loads((DATA / f"{run}_meta.json").read_text())
    rank_state = json.loads((DATA / f"{run}_rank_0.json").read_text())
    shutil.copy(DATA / f"{run}_meta.json", tmp_path / "meta.json")
    meta = read_meta(Checkpoint.from_directory(str(tmp_path)))
    assert meta.to_dict() == raw  # every key and value, the records' missing keys too
    assert [list(r.to_dict()) for r in meta.history] == [list(h) for h in raw["history"]]  # and their order
    assert (meta.evals, meta.steps, meta.first_open_pass) == (raw["epoch"], raw["steps"], raw["start_epoch"])
    assert [r.eval_index for r in meta.history] == list(range(1, len(raw["history"]) + 1))
    if run == "fashion_mnist":  # written before epoch records had `metric`
        assert all(r.absent == {"metric"} and r.metric is None for r in meta.history)
        assert meta.history[-1].scores == {"accuracy": raw["history"][-1]["accuracy"]}
    else:
        assert all(not r.absent for r in meta.history)
        assert meta.history[-1].metric == raw["history"][-1]["bits_per_byte"] == meta.history[-1].scores["bits_per_byte"]
        assert meta.history[-1].fresh_tokens == raw["history"][-1]["fresh_tokens"]
    # the worker loop's counters come back from both parts, and are saved in the same form
    state = LoopState.from_checkpoint(meta.state, rank_state)
    assert state.evals == raw["epoch"] and state.counters.steps == raw["steps"]
    run_part, rank_part = state.to_checkpoint()
    # counters written before `extra` (echo.fill_waits' copies) come back with none
    saved = {k: v for k, v in rank_state.items() if k != "pending"}
    assert "extra" not in saved["counters"] and state.counters.extra == 0
    saved["counters"] = {**saved["counters"], "extra": 0}
    # ... and the schedule's start they lack is the run's start (recovery/reshard.py schedule_epochs)
    assert run_part == {**raw["state"], "lr_from": [0, 0.0]} and rank_part == saved
