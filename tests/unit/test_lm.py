"""The language model, its held-out scores, the metric's direction, and the worker loop on
a generated text corpus without Ray (train/local_run.py): exact sequence and fresh counts,
echo and dropout batch augmentation of sequences."""

import math
import random

import pytest
import torch

from echoray.config_load import load_config
from echoray.data.shuffle_buffer import shuffled_batches
from echoray.data.sources import index_source
from echoray.metrics import METRICS, metric_named
from echoray.train.lm import TransformerLM, lm_loss, split_tokens
from echoray.train.lm_eval import TextEvalSet, eval_share, scores
from echoray.train.local_run import (
    LocalCollector,
    local_loop,
    preprocessed_blocks,
)

torch.set_num_threads(1)


def tiny(**kw):
    torch.manual_seed(0)
    return TransformerLM(vocab=kw.get("vocab", 50), context=16, width=32, layers=2, heads=4,
                         dropout=kw.get("dropout", 0.0))


def test_shapes_and_tied_embeddings():
    model = tiny()
    logits = model(torch.randint(0, 50, (3, 16)))
    assert logits.shape == (3, 16, 50)
    assert model.head.weight is model.embed.weight
    with pytest.raises(ValueError, match="longer than the model's context 16"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_a_later_token_never_changes_earlier_logits():
    model = tiny().eval()
    a = torch.randint(0, 50, (2, 16))
    b = a.clone()
    b[:, 9:] = (b[:, 9:] + 7) % 50  # change tokens 9..15
    with torch.no_grad():
        la, lb = model(a), model(b)
    assert torch.equal(la[:, :9], lb[:, :9])
    assert not torch.allclose(la[:, 9:], lb[:, 9:])


def test_dropout_makes_copies_of_one_sequence_differ_in_training_only():
    model = tiny(dropout=0.3)
    x = torch.randint(0, 50, (1, 16)).repeat(2, 1)
    out = model(x)
    assert not torch.allclose(out[0], out[1])
    model.eval()
    out = model(x)
    assert torch.equal(out[0], out[1])


def test_split_tokens_and_loss():
    tokens = torch.arange(10).view(2, 5)
    inputs, targets = split_tokens(tokens)
    assert inputs.tolist() == [[0, 1, 2, 3], [5, 6, 7, 8]] and targets.tolist() == [[1, 2, 3, 4], [6, 7, 8, 9]]
    uniform = torch.zeros(2, 4, 11)
    assert lm_loss(uniform, targets).item() == pytest.approx(math.log(11))


def test_scores_convert_nats_to_bits_per_byte_and_perplexity():
    s = scores(nats=1000 * math.log(2), tokens=500, n_bytes=1000)
    assert s["bits_per_byte"] == pytest.approx(1.0)
    assert s["eval_loss"] == pytest.approx(2 * math.log(2)) and s["perplexity"] == pytest.approx(4.0)


def test_metric_direction():
    acc, bpb = metric_named("accuracy"), metric_named("bits_per_byte")
    assert acc.reached(0.97, 0.97) and not acc.reached(0.96, 0.97) and acc.better(0.5, 0.6) == 0.6
    assert bpb.reached(1.2, 1.3) and not bpb.reached(1.31, 1.3) and bpb.better(1.5, 1.4) == 1.4
    assert bpb.better(1.5, float("nan")) == 1.5 and not bpb.reached(float("nan"), 9.0)
    assert not METRICS["perplexity"].higher_is_better and bpb.mode == "min" and acc.mode == "max"
    assert bpb.worst == math.inf and acc.worst == -math.inf


def test_eval_share_spreads_a_limit_over_the_split():
    assert eval_share(10, None, 0, 1).tolist() == list(range(10))
    assert eval_share(101, 5, 0, 1).tolist() == [0, 25, 50, 75, 100]
    assert eval_share(101, 5, 1, 2).tolist() == [25, 75]


def corpus(tmp_path, n_docs=24):
    rng = random.Random(0)
    vocab = ["the", "kernel", "module", "page", "cache", "über", "ring", "lock"]
    for i in range(n_docs):
        text = "".join(" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 12))) + "\n" for _ in range(40))
        (tmp_path / f"d{i:02d}.txt").write_text(text)
    return tmp_path


BASE = ["train.target=null", "audit.enabled=true", "train.max_epochs=2", "train.batch_size=8",
        "train.checkpoint_every=0", "source.seq_len=32", "source.eval_limit=32",
        "model.width=32", "model.layers=1", "model.heads=2", "train.evals_per_epoch=1",
        "source.text_suffixes=[.txt]", "source.holdout_fraction=0.2"]


def run_text(repo, tmp_path, overrides):
    cfg = load_config(repo / "pipelines" / "lm_linux_doc.yaml",
                      [*BASE, f"source.path={corpus(tmp_path)}", *overrides])
    idx = index_source(cfg.source)
    col = LocalCollector()
    final = local_loop(cfg, idx, col).run(shuffled_batches(preprocessed_blocks(cfg, idx), 8, 64, 7))
    return cfg, idx, col, final


def pairs(audit):
    return set(zip(audit["epoch"].tolist(), audit["sample_id"].tolist(), strict=True))


def test_text_run_counts_sequences_and_fresh_examples_exactly(repo, tmp_path):
    cfg, idx, col, final = run_text(repo, tmp_path, [])
    n = len(idx.train_ids)
    audit = col.audit_columns()
    # one stream of 2n rows (its last batch may hold both epochs' rows); evaluation 1 at the
    # first step past n fresh sequences, the last at the stream's end
    assert final["steps"] == 2 * n // 8 and [ev["step"] for ev in col.events] == [math.ceil(n / 8), final["steps"]]
    assert final["fresh_examples"] == len(pairs(audit)) == 8 * final["steps"]  # every trained row is fresh
    assert set(audit["sample_id"].tolist()) <= set(range(n)) and n - 8 < len(pairs(audit)) // 2 <= n
    for ev in col.events:
        assert ev["bits_per_byte"] > 0 and ev["perplexity"] == pytest.approx(math.exp(ev["eval_loss"]))
        assert ev["metric"] == ev["bits_per_byte"] and "accuracy" not in ev
    assert final["best_metric"] == min(ev["bits_per_byte"] for ev in col.events)
    assert final["last_accuracy"] is None


def test_example_echo_of_sequences(repo, tmp_path):
    _, idx, col, final = run_text(repo, tmp_path, ["echo.stage=before_augment", "echo.factor=2"])
    audit = col.audit_columns()
    assert final["trained_examples"] == len(audit["sample_id"]) == 8 * final["steps"]
    assert final["fresh_examples"] == len(pairs(audit))
    # every sample trained twice but the copies left in the stream's last, partial batch
    assert 0 <= 2 * final["fresh_examples"] - final["trained_examples"] < 8
    assert sorted(set(audit["view"].tolist())) == [0, 1]


def test_dropout_batch_augmentation_trains_m_copies_of_each_sequence(repo, tmp_path):
    _, _, col, final = run_text(repo, tmp_path, ["batch_augmentation.copies=3", "model.dropout=0.2"])
    audit = col.audit_columns()
    assert final["trained_examples"] == 3 * final["trained_samples"] == 3 * final["fresh_examples"]
    assert sorted(set(audit["ba_view"].tolist())) == [0, 1, 2]
    per_step = audit["step"] == 0
    assert sorted(audit["sample_id"][per_step].tolist()) == sorted(3 * audit["sample_id"][per_step][:8].tolist())


def test_a_target_below_is_reached_from_above(repo, tmp_path):
    _, _, col, final = run_text(repo, tmp_path, ["train.target=50.0"])
    assert final["stop_reason"] == "target reached" and final["evaluations"] == 1
    assert final["to_target"]["bits_per_byte"] <= 50.0


def test_text_eval_set_scores_a_uniform_model_at_log2_vocab_per_byte(repo, tmp_path):
    cfg = load_config(repo / "pipelines" / "lm_linux_doc.yaml",
                      [*BASE, f"source.path={corpus(tmp_path)}", "source.eval_limit=null"])
    idx = index_source(cfg.source)
    ev = TextEvalSet(idx, 0, 1)

    class Uniform(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, ids):
            return torch.zeros(*ids.shape, 257)

    got = ev.evaluate(Uniform(), None, 16)
    tokens = ev.tokens[:, 1:]
    n_bytes = int((tokens < 256).sum())
    assert got["eval_loss"] == pytest.approx(math.log(257))
    assert got["bits_per_byte"] == pytest.approx(math.log2(257) * tokens.numel() / n_bytes)
    assert len(ev.tokens) == len(idx.eval_ids)


def test_search_outcome_and_report_follow_the_metric_direction(tmp_path):
    from echoray.tune.outcome import summarize
    from echoray.tune.plots import plot_batch_augmentation, reach_sign
    from echoray.tune.report import format_table

    recs = [{"repeat": 0, "index": i, "trial_key": f"r0-t{i}", "params": {}, "seed": 1, "status": "reached",
             "fresh_examples_to_target": f, "steps_to_target": 1, "best_accuracy": None, "best_metric": b,
             "mlflow_run_id": None} for i, (f, b) in enumerate([(900, 1.9), (400, 2.1)])]
    out = summarize(recs, 1)
    assert out["repeats"][0]["best"]["best_metric"] == 2.1  # fewest fresh examples wins, not the metric
    assert out["best_metric"]["mean"] == 2.1 and out["best_accuracy"]["n"] == 0
    assert reach_sign("bits_per_byte") == "<=" and reach_sign("accuracy") == ">="
    rows = [{"copies": m, "best_metric": {"mean": v, "min": v - 0.1, "max": v + 0.1, "n": 1}}
            for m, v in ((1, 2.0), (4, 1.8))]
    assert plot_batch_augmentation(rows, tmp_path / "ba.png", "t", "bits_per_byte").exists()
    table = format_table([{"label": "baseline", "factor": 1.0, "relative": {"mean": 1.0},
                           "fresh_examples_to_target": {"mean": 5.0, "min": 4.0, "max": 6.0},
                           "best_metric": {"mean": 1.8}}], "bits_per_byte")
    assert "best bpb" in table[0] and "1.8000" in table[1]


def test_a_text_trial_reports_its_metric_not_an_accuracy():
    from echoray.tune.trial import final_report

    s = {"epochs": 2, "metric": {"name": "bits_per_byte", "value": 2.5, "target": 2.6}, "best_metric": 2.4,
         "fresh_examples": 10, "trained_examples": 20, "target_reached": True, "fresh_examples_to_target": 8,
         "steps_to_target": 3, "wall_s": 1.0, "mlflow_run_id": "x"}
    r = final_report(s)
    assert (r["metric_name"], r["metric"], r["best_metric"]) == ("bits_per_byte", 2.5, 2.4)
    assert "accuracy" not in r and "best_accuracy" not in r
    image = final_report({**s, "metric": {"name": "accuracy", "value": 0.9, "target": 0.8}, "best_metric": 0.91})
    assert image["accuracy"] == 0.9 and image["best_accuracy"] == image["best_metric"] == 0.91
