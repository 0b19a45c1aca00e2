"""Echoing at each stage, checked exactly from the audit (index-encoded digits ids)."""

from collections import Counter, defaultdict

import numpy as np
import pytest
from slow_store import overrides as slow_store

from echoray.config_load import load_config
from echoray.data.echo import auto_factor, copy_counts, echo_keys, update_r_estimate
from echoray.data.sources import index_source

BASE = ["train.target=null", "audit.enabled=true", "source.limit=128", "train.max_epochs=2",
        "train.batch_size=32", "echo.shuffle_buffer=256"]
# One worker trained in the test's process, as `echoray train` trains on a local Ray it
# started: the same stream, echo and worker loop as a Ray Train worker's (test_warm_trials:
# the same audit rows), ~10 s less per run. The two-worker tests and auto echo below train
# in Ray Train worker groups.
IN_PROCESS = "scaling.local_mode=true"


def rows(audit):
    return audit.to_pydict()


def copies_per_item(t):
    return Counter(zip(t["epoch"], t["sample_id"], strict=True))


def assert_fresh_is_distinct_samples_trained(summary, t):
    """Issue 18: fresh = distinct (epoch, sample_id) trained, at the end and at every evaluation."""
    pairs = list(zip(t["epoch"], t["sample_id"], strict=True))
    assert summary["fresh_examples"] == len(set(pairs))
    for h in summary["history"]:
        assert h["fresh_examples"] == len({p for p, s in zip(pairs, t["step"], strict=True) if s < h["step"]})


@pytest.mark.parametrize("stage", ["before_augment", "after_augment", "batch"])
def test_integer_factor_every_fresh_sample_appears_exactly_e_times_per_epoch(run_pipeline, stage):
    summary, audit = run_pipeline(None, *BASE, IN_PROCESS, f"echo.stage={stage}", "echo.factor=2", name=stage)
    t = rows(audit)
    train_ids = index_source(load_config(None, BASE).source).train_ids
    counts = copies_per_item(t)
    assert set(counts) == {(e, int(i)) for e in range(2) for i in train_ids}
    assert set(counts.values()) == {2}
    assert summary["fresh_examples"] == 256 == sum(v == 0 for v in t["view"])
    assert summary["trained_examples"] == 512 == audit.num_rows
    assert_fresh_is_distinct_samples_trained(summary, t)
    assert summary["echo"]["measured_factor"] == 2.0 and summary["echo"]["stage"] == stage

    keys = defaultdict(list)
    for e, i, k in zip(t["epoch"], t["sample_id"], t["aug_key"], strict=True):
        keys[(e, i)].append(k)
    distinct = {len(set(v)) for v in keys.values()}
    if stage == "before_augment":
        assert distinct == {2}  # each copy augmented on its own
    else:
        assert distinct == {1}  # copies of one augmented example are identical

    if stage == "batch":  # whole batches repeat: steps 2k and 2k+1 hold the same ids in order
        by_step = defaultdict(list)
        for s, i in zip(t["step"], t["sample_id"], strict=True):
            by_step[s].append(i)
        assert len(by_step) == 16
        for k in range(0, 16, 2):
            assert by_step[k] == by_step[k + 1]
            assert Counter(t["view"][j] for j in range(len(t["step"])) if t["step"][j] == k + 1) == {1: 32}
    # the reported fraction is the audit's: batches (steps) holding two copies of one (epoch, sample)
    batches = defaultdict(list)
    for s, e, i in zip(t["step"], t["epoch"], t["sample_id"], strict=True):
        batches[s].append((e, i))
    assert len(batches) == 16 and all(len(b) == 32 for b in batches.values())
    dup = sum(len(set(b)) < len(b) for b in batches.values())
    assert summary["echo"]["duplicate_batch_fraction"] == dup / 16
    if stage == "batch":
        assert dup == 0  # a batch echo repeats whole batches: no batch holds a sample twice


def test_fractional_factor_matches_the_per_item_draws_exactly(run_pipeline):
    overrides = [*BASE, IN_PROCESS, "echo.stage=before_augment", "echo.factor=2.5", "train.batch_size=1",
                 "echo.shuffle_buffer=64"]
    summary, audit = run_pipeline(None, *overrides, name="frac")
    t = rows(audit)
    counts = copies_per_item(t)
    items = sorted(counts)
    epochs = np.array([e for e, _ in items])
    ids = np.array([i for _, i in items])
    expected = copy_counts(echo_keys(0, epochs, ids), 2.5)
    assert [counts[k] for k in items] == expected.tolist()  # batch size 1: nothing dropped
    assert set(expected.tolist()) == {2, 3}
    assert abs(expected.mean() - 2.5) < 4 * np.sqrt(0.25 / len(items))
    assert summary["fresh_examples"] == 256 and summary["trained_examples"] == int(expected.sum())
    assert summary["echo"]["measured_factor"] == pytest.approx(expected.sum() / 256)
    assert_fresh_is_distinct_samples_trained(summary, t)


@pytest.mark.parametrize("stage", ["before_augment", "after_augment", "batch"])
def test_fractional_factor_two_workers_fresh_is_distinct_samples_trained(run_pipeline, stage):
    overrides = [*BASE, f"echo.stage={stage}", "echo.factor=1.5", "echo.shuffle_buffer=128",
                 "scaling.num_workers=2", "scaling.cpus_per_worker=0.5"]
    summary, audit = run_pipeline(None, *overrides, name=f"fresh2-{stage}")
    t = rows(audit)
    assert_fresh_is_distinct_samples_trained(summary, t)
    assert set(t["worker"]) == {0, 1} and len(summary["history"]) >= 2
    # streaming_split(equal=True): both workers get the same rows and train whole batches of 32
    per_worker = Counter(t["worker"])
    assert per_worker[0] == per_worker[1] and per_worker[0] % 32 == 0
    assert summary["trained_examples"] == audit.num_rows == 2 * per_worker[0]
    workers = defaultdict(set)
    for e, i, w in zip(t["epoch"], t["sample_id"], t["worker"], strict=True):
        workers[(e, i)].add(w)
    split = sum(len(w) > 1 for w in workers.values())
    # Per worker, each sample counts when its first copy arrives there; a sample whose copies
    # landed on both workers (rare: only where the splitter cuts a block to equalise the end
    # of the stream) is counted once in all, by the reconcile at each evaluation. The count
    # of such samples varies with scheduling (often 0); reconcile's rules are checked exactly
    # on constructed tables in tests/unit/test_worker_loop.py.
    counted_per_worker = sum(len(w) for w in workers.values())  # what summing the workers' own counts gives
    assert summary["fresh_examples"] == len(workers) == counted_per_worker - split
    if stage != "batch":  # every copy trained is one of the sample's drawn copies, none trained twice
        counts = copies_per_item(t)
        items = sorted(counts)
        drawn = copy_counts(echo_keys(0, np.array([e for e, _ in items]), np.array([i for _, i in items])), 1.5)
        assert all(counts[k] <= int(n) for k, n in zip(items, drawn, strict=True))


def test_auto_factor_adapts_toward_measured_r_and_is_logged(run_pipeline, sqlite_uri):
    from mlflow.tracking import MlflowClient

    # Reads of 16 samples wait 120 ms, one at a time: about 130 fresh examples/s against a
    # train step several times faster, so the run is input-bound and auto echo should climb.
    # (With 16 reads in flight, the default, their latencies overlap and R is about 1.)
    # The worker echoes each row as it takes it (train/consumption_echo.py), so the factor
    # applies from the first measurement on: two epochs of 1024 (~15 s of reads) suffice.
    # auto starts at the cap. Spare copies (a gap filled with extra copies of samples trained
    # lately) are allowed and bounded below; that a gap is filled is test_consumption_echo's.
    overrides = ["train.target=null", "source.limit=1024", "train.max_epochs=2", "echo.stage=after_augment",
                 "echo.factor=auto", "echo.max_factor=4", "source.chunk_size=16",
                 *slow_store("digits", latency_ms=120, read_concurrency=1), "audit.enabled=true"]
    summary, audit = run_pipeline(None, *overrides, name="auto")
    assert summary["measured_R"] > 2.0
    assert 2.0 < summary["echo"]["final_factor"] <= 4.0
    assert summary["echo"]["measured_factor"] > 2.0
    trace = summary["echo"]["factor_history"]
    assert len(trace) >= 2
    assert trace[0]["factor"] == pytest.approx(min(4.0, max(1.0, trace[0]["measured_R"])))  # first: straight to R
    # every point is the auto law (data/echo.py) applied to the windows so far, and the last is the run's final e
    state = None
    for p in trace:
        state = update_r_estimate(state, p["measured_R"])
        assert p["factor"] == pytest.approx(auto_factor(state, 4.0))
    assert summary["echo"]["final_factor"] == trace[-1]["factor"]
    # Extra copies the worker trained instead of waiting (if any) are never counted
    # fresh, never past echo.max_factor copies of a sample; each trained row its own copy index
    rows = audit.select(["epoch", "sample_id", "view"]).to_pandas()
    assert not rows.duplicated().any()
    per_sample = rows.groupby(["epoch", "sample_id"]).size()
    assert summary["fresh_examples"] == len(per_sample) and per_sample.max() <= 4
    assert summary["trained_examples"] == len(rows)
    # MLflow holds exactly those points, each at the optimizer step the driver had seen
    client = MlflowClient(sqlite_uri)
    for metric, key in (("echo_factor", "factor"), ("echo_measured_R", "measured_R")):
        logged = client.get_metric_history(summary["mlflow_run_id"], metric)
        assert sorted(m.value for m in logged) == pytest.approx(sorted(p[key] for p in trace)), metric
        assert all(0 <= m.step <= summary["steps"] for m in logged), metric
