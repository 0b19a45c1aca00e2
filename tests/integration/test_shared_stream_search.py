"""A search whose trials share one preprocessing stream (tune/share_hub.py): 3 digits trials,
2 at a time, each echoing the shared stream at its own factor (1 or 2) on its worker. The
search's first point diverges (lr 10000: NaN loss in epoch 1) and fails: it detaches
at once and the others go on; the third trial attaches after it, where the stream stands.

Exact per trial: its rows are the stream's rows from where it attached (the read plan of
its data seed, in order: preprocess.deterministic), `train.max_epochs` x 1438 of them;
every row it trained is one of them, each (epoch, sample) at most `factor` times, and the
untrained rest is exactly the last partial batch; its fresh count is its distinct
(epoch, sample) pairs. The first trial to attach starts at row 0, so its rows are its
private stream's: every id exactly max_epochs times. The producer read every sample
once per plan epoch it produced, and no more rows than the furthest trial needed plus
the window; its actors read at most two calls each beyond that. The MLflow parent run records the group; no hub is left running."""

import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import ray
import yaml
from mlflow.tracking import MlflowClient
from ray.util.state import list_actors

from echoray.config_load import load_config, read_yaml
from echoray.data.plan import read_plan
from echoray.data.sources import index_source
from echoray.tune.share_producer import DEPTH

EPOCHS, BATCH = 3, 64
DIVERGING_LR = 10000.0


def write_pipeline(tmp_path: Path) -> Path:
    tree = read_yaml(Path(__file__).parents[2] / "pipelines" / "digits_search.yaml")
    tree["train"].update(max_epochs=EPOCHS, target=None, batch_size=BATCH)
    tree["echo"].update(stage="after_augment")
    tree["audit"] = {"enabled": True}
    # seed 0, 3 points: (e 1, lr 10000) diverges; (e 2, lr 0.03) and (e 1, lr 0.1) train
    tree["search"].update(max_concurrent=2, space={"optimizer.lr": {"choices": [0.03, 0.1, DIVERGING_LR]},
                                                   "echo.factor": {"choices": [1.0, 2.0]}})
    path = tmp_path / "shared.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def stream_rows(seed: int, epochs: int, train_ids: np.ndarray, per_call: int) -> list[tuple[int, int]]:
    """The shared stream's (epoch, sample_id) rows in order: the read plan, chunk_size 1."""
    blocks = read_plan(seed, epochs, len(train_ids), block_chunks=per_call)
    epoch = np.concatenate([b["epoch"] for b in blocks])
    chunk = np.concatenate([b["chunk"] for b in blocks])
    return list(zip(epoch.tolist(), train_ids[chunk].tolist(), strict=True))


def collector_actors() -> int:
    """RunCollector actors this Ray has ever had, alive or dead."""
    return len(list_actors(address=ray.get_runtime_context().gcs_address,
                           filters=[("class_name", "=", "RunCollector")], limit=10_000))


def test_trials_share_one_stream_exactly(local_ray, tmp_path, sqlite_uri):
    import echoray.api as api

    pipeline = write_pipeline(tmp_path)
    collectors_before = collector_actors()
    summary = api.tune(pipeline, [f"tracking.uri={sqlite_uri}"], trials=3, repeats=1, out=tmp_path / "search")
    # trials in process on the shared stream keep their collectors in process (local_collector.py)
    assert collector_actors() == collectors_before
    report = json.loads((tmp_path / "search" / "share_streams.json").read_text())
    (group,) = report["groups"]
    assert group["error"] is None and group["evicted"] == {}
    assert group["trials"] == ["r0-t0", "r0-t1", "r0-t2"]

    cfg = load_config(pipeline, [f"tracking.uri={sqlite_uri}"])
    idx = index_source(cfg.source)
    train_ids = idx.train_ids
    (held,) = group["held_out"]  # the held-out set: decoded once, by the hub, for all three trials
    assert (held["rows"], held["asks"], held["error"]) == (len(idx.eval_ids), 3, None)
    n = len(train_ids)
    quota = EPOCHS * n
    seed = summary["trials"][0]["seed"]
    rows = stream_rows(seed, group["epochs"], train_ids, cfg.preprocess.batch_size)
    consumers = {c["trial"]: c for c in group["consumers"]}
    assert sorted(consumers) == group["trials"]
    assert min(c["start_row"] for c in consumers.values()) == 0  # the first to attach: row 0

    client = MlflowClient(sqlite_uri)
    statuses = {rec["trial_key"]: rec["status"] for rec in summary["trials"]}
    assert statuses == {"r0-t0": "error", "r0-t1": "not_reached", "r0-t2": "not_reached"}
    failed = consumers["r0-t0"]
    assert failed["ended"] == "the run failed or was stopped" and failed["rows_used"] < quota
    for rec in summary["trials"][1:]:
        c = consumers[rec["trial_key"]]
        assert rec["seed"] == seed
        assert c["rows_used"] == quota and c["ended"] == "read its train.max_epochs of rows"
        run = client.get_run(rec["mlflow_run_id"])
        assert run.data.tags["echoray.shared_stream"] == "true"
        run_dir = Path(run.data.tags["echoray.run_dir"])
        trial = json.loads((run_dir / "summary.json").read_text())
        audit = pq.read_table(run_dir / "audit.parquet").to_pydict()
        e = int(rec["params"]["echo.factor"])
        mine = rows[c["start_row"]: c["start_row"] + quota]  # its rows of the stream
        pairs = Counter(zip(audit["epoch"], audit["sample_id"], strict=True))
        allowed = Counter({p: e for p in mine})
        assert len(set(mine)) == quota  # never one (epoch, sample) twice
        assert not pairs - allowed  # every trained row is one of its rows, at most e copies
        trained = BATCH * (e * quota // BATCH)
        assert len(audit["sample_id"]) == trial["trained_examples"] == trained
        assert sum((allowed - pairs).values()) == e * quota - trained  # the last partial batch only
        assert trial["fresh_examples"] == len(pairs)  # exact: distinct (epoch, sample) trained
        assert trial["steps"] == trained // BATCH
        if c["start_row"] == 0:  # its private stream's rows: plan epochs 0..2, each id 3 times
            assert set(mine) == {(ep, int(i)) for ep in range(EPOCHS) for i in train_ids}

    assert consumers["r0-t2"]["attached_at"] >= failed["detached_at"]  # it ran in the failed one's place
    furthest = max(c["start_row"] + c["rows_taken"] for c in consumers.values())
    reads = {int(k): v for k, v in group["reads_per_epoch"].items()}
    assert all(v["max_count"] == 1 and v["late_rows"] == 0 for v in reads.values())  # none read twice in an epoch
    assert all(reads[ep] == {"rows": n, "distinct": n, "max_count": 1, "late_rows": 0} for ep in range(furthest // n))
    assert group["produced_rows"] == sum(v["rows"] for v in reads.values())
    assert group["produced_rows"] <= furthest + group["window_rows"] + cfg.preprocess.batch_size
    # the actors read at most DEPTH calls each past what the hub produced (tune/share_producer.py)
    ahead = DEPTH * cfg.preprocess.actors.min_size * cfg.preprocess.batch_size
    assert 0 <= group["read_unused_rows"] <= ahead and group["calls_cut"] <= DEPTH * cfg.preprocess.actors.min_size
    assert group["window"]["peak_rows"] <= group["window_rows"] + cfg.preprocess.batch_size
    print(f"shared stream: {group['produced_rows']} rows read for "
          f"{sum(c['rows_taken'] for c in consumers.values())} rows taken by 3 trials; starts "
          f"{[consumers[t]['start_row'] for t in group['trials']]}")

    parent = client.get_run(summary["mlflow_parent_run_id"])
    assert parent.data.tags["echoray.share_group.g0"] == (
        f"shared stream; upstream key {group['key']}; trials r0-t0,r0-t1,r0-t2")
    assert parent.data.tags["echoray.share_preprocessing"] == "1 shared stream(s) for 3 trial(s)"
    assert parent.data.params["search.share_preprocessing"] == "True"
    assert "share_streams.json" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert summary["share_groups"] == [parent.data.tags["echoray.share_group.g0"]]

    deadline = time.monotonic() + 60
    while list_actors(address=ray.get_runtime_context().gcs_address,
                      filters=[("class_name", "=", "StreamHub"), ("state", "=", "ALIVE")]):
        assert time.monotonic() < deadline, "a StreamHub actor outlived its search"
        time.sleep(0.2)
