"""A tiny language model trained end to end on a local Ray (`echoray train`'s path):
a generated corpus of plain and .gz documents, exact sequence and fresh counts from the
audit, bits per byte in MLflow, the BPE tokenizer saved, and the same corpus from S3."""

import gzip
import json
import random
from collections import Counter
from pathlib import Path

import mlflow.artifacts
import mlflow.pytorch
import torch
from mlflow.tracking import MlflowClient
from test_train_pipeline import assert_final_model

from echoray.config_load import load_config
from echoray.data.sources import index_source

TINY = ["train.target=null", "audit.enabled=true", "train.max_epochs=2", "train.batch_size=16",
        "train.evals_per_epoch=1", "source.seq_len=32", "source.eval_limit=64",
        "source.text_suffixes=[.txt]", "source.holdout_fraction=0.2", "model.width=32", "model.layers=1",
        "model.heads=2", "train.log_every_s=0", "train.checkpoint_every=0",
        # trained in the test's process, as `echoray train` trains a one-worker run on a local
        # Ray it started (the same stream and counts as a Ray Train worker's, test_warm_trials)
        "scaling.local_mode=true"]


def write_corpus(root: Path) -> Path:
    rng = random.Random(0)
    vocab = ["the", "kernel", "module", "page", "cache", "über", "ring", "lock", "naïve"]
    root.mkdir(parents=True, exist_ok=True)
    # 61 lines a document: 1,075 training sequences, whose 3 left over per epoch (n % 16) make
    # no batch with the next epoch's (at 60 lines, 1,064: the two epochs' 8 and 8 made one more)
    for i in range(20):
        text = "".join(" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 12))) + "\n" for _ in range(61))
        if i % 3 == 0:
            (root / f"d{i:02d}.txt.gz").write_bytes(gzip.compress(text.encode()))
        else:
            (root / f"d{i:02d}.txt").write_text(text)
    return root


def test_tiny_lm_end_to_end_exact_counts_and_mlflow(run_pipeline, repo, tmp_path, sqlite_uri):
    pipeline = repo / "pipelines" / "lm_linux_doc.yaml"
    overrides = [*TINY, f"source.path={write_corpus(tmp_path / 'corpus')}"]
    summary, audit = run_pipeline(pipeline, *overrides)
    idx = index_source(load_config(pipeline, overrides).source)
    n = len(idx.train_ids)
    steps = 2 * (n // 16)  # n % 16 < 8 (write_corpus): each epoch's leftovers stay untrained
    assert n % 16 < 8 and summary["steps"] == steps and summary["evaluations"] == 2
    assert summary["epochs"] == round(steps * 16 / n, 4)  # passes of fresh sequences: the tails go untrained
    t = audit.to_pydict()
    pairs = set(zip(t["epoch"], t["sample_id"], strict=True))
    assert summary["fresh_examples"] == summary["trained_examples"] == len(pairs) == audit.num_rows == steps * 16
    for e in (0, 1):  # each epoch: distinct sequences of the training split, all but < one batch of them
        ids = [s for s, ep in zip(t["sample_id"], t["epoch"], strict=True) if ep == e]
        assert len(ids) == len(set(ids)) and set(ids) <= set(range(n)) and n - len(ids) < 16
    assert set(Counter(t["step"]).values()) == {16}
    m = summary["metric"]
    assert m["name"] == "bits_per_byte" and m["direction"] == "lower is better" and m["value"] > 0
    assert summary["best_metric"] == min(h["bits_per_byte"] for h in summary["history"])
    text = summary["text"]
    assert text["tokenizer"] == "bytes" and text["vocab_size"] == 257 and text["seq_len"] == 32
    assert text["fresh_tokens"] == summary["fresh_examples"] * 32 and text["train"]["sequences"] == n
    client = MlflowClient(sqlite_uri)
    run_id = summary["mlflow_run_id"]
    at = [h["step"] for h in summary["history"]]  # MLflow's step: optimizer steps
    assert len(at) == 2 and at[-1] == summary["steps"]
    assert [r.step for r in client.get_metric_history(run_id, "bits_per_byte")] == at
    assert [r.step for r in client.get_metric_history(run_id, "perplexity")] == at
    assert client.get_metric_history(run_id, "accuracy") == []
    assert_final_model(client, run_id, summary["epochs"])  # the weights the run ended with


def test_bpe_from_s3_saves_its_tokenizer(run_pipeline, repo, s3, tmp_path, sqlite_uri):
    root = write_corpus(tmp_path / "corpus")
    rng = random.Random(1)  # and one .gz of several ranges stored (4 KB), read range by range from the bucket
    big = "".join(f"{rng.randint(0, 10**9)} {rng.choice(['lock', 'page'])}\n" for _ in range(3000)).encode()
    (root / "big.txt.gz").write_bytes(gzip.compress(big, compresslevel=1))
    uri = s3.upload(root, s3.make_bucket("echoray-text") + "/docs")
    pipeline = repo / "pipelines" / "lm_linux_doc.yaml"
    overrides = [*TINY, f"source.path={uri}", "train.max_epochs=1", "train.checkpoint_every=1",
                 "source.tokenizer={kind: bpe, vocab_size: 300}",
                 "audit.enabled=false", "source.holdout_fraction=0.05"]
    summary, _ = run_pipeline(pipeline, *overrides)
    idx = index_source(load_config(pipeline, overrides).source)
    docs = idx.details["train_docs"]
    cut = [p for u in idx.details["train_units"] for p in u if docs[p[0]].path.endswith("big.txt.gz")]
    assert len(cut) > 5 and cut[0][1] == 0 and cut[-1][2] == len(big)  # indexed where it was listed
    assert summary["text"]["train"]["sequences"] == len(idx.train_ids)
    run_dir = Path(summary["run_dir"])
    tok = json.loads((run_dir / "tokenizer.json").read_text())
    # a 9-word corpus runs out of merges before 300 symbols: the vocabulary is what the BPE learnt
    assert len(tok["model"]["vocab"]) == summary["text"]["vocab_size"] <= 300 and summary["text"]["tokenizer"] == "bpe"
    client = MlflowClient(sqlite_uri)
    artifacts = {a.path for a in client.list_artifacts(summary["mlflow_run_id"])}
    assert "tokenizer.json" in artifacts
    # the model, the weights the run ended with, and its tokenizer
    (logged,) = client.get_run(summary["mlflow_run_id"]).outputs.model_outputs
    model_dir = Path(mlflow.artifacts.download_artifacts(f"models:/{logged.model_id}", tracking_uri=sqlite_uri))
    assert json.loads((model_dir / "extra_files" / "tokenizer.json").read_text()) == tok
    tokens = torch.randint(0, summary["text"]["vocab_size"], (3, 32))
    assert tuple(mlflow.pytorch.load_model(str(model_dir))(tokens).shape) == (3, 32, summary["text"]["vocab_size"])
