"""pipelines/fashion_mnist.yaml on the real Fashion-MNIST files (Debian's dataset-fashion-mnist,
gzipped IDX), a few hundred ids: exact accounting from the audit, baseline and echo."""

from collections import Counter
from pathlib import Path

import pytest

from echoray.config_load import load_config
from echoray.data.sources import index_source

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipelines" / "fashion_mnist.yaml"
FASHION = Path("/usr/share/datasets/fashion-mnist")
# scaling.local_mode: trained in the test's process, as `echoray train` trains a one-worker
# run on a local Ray it started (the same stream and counts as a Ray Train worker's,
# test_warm_trials; ~10 s less per run than starting a worker group).
SMALL = ["source.limit=384", "source.eval_limit=256", "train.max_epochs=2", "train.target=null",
         "train.batch_size=64", "audit.enabled=true", "echo.shuffle_buffer=512", "scaling.local_mode=true"]

pytestmark = pytest.mark.skipif(not FASHION.is_dir(), reason="Debian's dataset-fashion-mnist is not installed")


@pytest.mark.parametrize("echo", [("none", 1), ("before_augment", 2)])
def test_fashion_mnist_reads_every_training_id_once_per_epoch(run_pipeline, echo):
    stage, factor = echo
    overrides = [*SMALL, f"echo.stage={stage}", f"echo.factor={factor}"]
    summary, audit = run_pipeline(PIPELINE, *overrides, name=f"fmnist-{stage}")
    idx = index_source(load_config(PIPELINE, overrides).source)
    assert idx.kind == "idx" and idx.num_classes == 10 and len(idx.eval_ids) == 256
    t = audit.to_pydict()
    pairs = Counter(zip(t["epoch"], t["sample_id"], strict=True))
    # every one of the 384 training ids, in each of the 2 epochs, exactly `factor` times
    assert set(pairs) == {(e, int(i)) for e in range(2) for i in idx.train_ids}
    assert set(pairs.values()) == {factor}
    assert summary["fresh_examples"] == len(pairs) == 768
    assert summary["trained_examples"] == audit.num_rows == 768 * factor
    # the pipeline evaluates twice per epoch of fresh data: 4 evaluations in 2 epochs
    assert summary["steps"] == 768 * factor // 64 and summary["evaluations"] == 4 and summary["epochs"] == 2
    if factor == 1:  # evaluations at steps 3, 6, 9, 12 of 64 fresh examples each
        assert [h["fresh_examples"] for h in summary["history"]] == [192, 384, 576, 768]
    assert summary["echo"]["measured_factor"] == float(factor)
    for h in summary["history"]:  # fresh at each evaluation = distinct (epoch, sample) trained before it
        assert h["fresh_examples"] == len({p for p, s in zip(zip(t["epoch"], t["sample_id"], strict=True),
                                                             t["step"], strict=True) if s < h["step"]})
    keys = Counter(zip(t["epoch"], t["sample_id"], t["aug_key"], strict=True))
    assert len(keys) == 768 * factor  # echo before augmentation: each copy its own crop and flip
    assert 0.0 <= summary["metric"]["value"] <= 1.0 and summary["metric"]["name"] == "accuracy"
