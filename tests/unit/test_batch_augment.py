from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from echoray.config import AugmentOp, PipelineConfig
from echoray.config_load import load_config
from echoray.data.augment import augment_batch
from echoray.seeds import STREAM_MODEL, derive_seed, to_int63
from echoray.summary import build_summary
from echoray.train.batch_augment import (
    backward_views,
    dropout_seed,
    eval_view_keys,
    make_views,
    step_counts,
    view_indices,
    view_keys,
    worker_views,
)
from echoray.train.evaluate import Normalizer, tta_predict
from echoray.train.ghost_bn import GhostBatchNorm2d, use_ghost_batch_norm
from echoray.train.models import build_model

OPS = [AugmentOp(op="random_crop", padding=2), AugmentOp(op="flip")]
ROOT = Path(__file__).resolve().parents[2]


def batch(n=8):
    return {"epoch": np.zeros(n, np.int64), "sample_id": np.arange(n) + 100, "echo_copy": np.zeros(n, np.int64),
            "label": (np.arange(n) % 3).astype(np.int64)}


def test_view_keys_distinct_per_view_and_grouped_members_make_the_local_views():
    local = view_keys(0, batch(), per_copy=False, views=view_indices(4, "local", 0))
    assert len(local) == 32 and len(set(local.tolist())) == 32
    assert np.array_equal(local, view_keys(0, batch(), False, np.arange(4)))  # deterministic
    members = [view_keys(0, batch(), False, view_indices(4, "grouped", m)) for m in range(4)]
    assert all(len(k) == 8 for k in members)
    # member m makes exactly local view m: the group's M views are local mode's M views
    assert np.array_equal(np.concatenate(members), local)
    from echoray.data.stages import augment_keys  # M = 1 on the worker matches the CPU path's key

    assert np.array_equal(view_keys(0, batch(), False, np.arange(1)), augment_keys(0, batch(), False))


def test_make_views_are_view_major_and_differ():
    imgs = torch.randint(0, 255, (8, 16, 16, 1), dtype=torch.uint8)
    keys = view_keys(0, batch(), False, np.arange(3))
    views = make_views(imgs, keys, 3, OPS)
    assert views.shape == (24, 16, 16, 1)
    differ = sum(not torch.equal(views[i], views[8 + i]) for i in range(8))
    assert differ >= 6
    plain = make_views(imgs, keys, 3, [])
    assert torch.equal(plain[:8], imgs) and torch.equal(plain[8:16], imgs) and torch.equal(plain[16:], imgs)


def test_worker_views_keep_images_labels_keys_and_audit_rows_aligned():
    b = batch(6)
    imgs = torch.randint(0, 255, (6, 12, 12, 3), dtype=torch.uint8)
    for views in (np.arange(3), view_indices(3, "grouped", 2)):
        x, y, key, rows = worker_views(0, b, imgs, torch.as_tensor(b["label"]), per_copy=False, views=views,
                                       ops=OPS, on_worker=True)
        assert len(x) == len(y) == len(key) == len(rows["sample_id"]) == 6 * len(views)
        for i in range(len(x)):  # row i is sample rows.sample_id[i] augmented with its view's key
            s = int(rows["sample_id"][i]) - 100
            ref_key = view_keys(0, {k: v[s : s + 1] for k, v in b.items()}, False, rows["ba_view"][i : i + 1])
            assert y[i] == b["label"][s] and to_int63(ref_key)[0] == key[i]
            assert torch.equal(x[i], augment_batch(imgs[s : s + 1], ref_key, OPS)[0])
        assert sorted(set(rows["ba_view"].tolist())) == sorted(views.tolist())


def test_no_ghost_batch_of_the_cifar10_resnet44_ba_layout_holds_two_views_of_one_sample():
    cfg = load_config(str(ROOT / "pipelines/cifar10_resnet44_ba.yaml"), [])
    b_size, m, ghost = cfg.train.batch_size, cfg.batch_augmentation.copies, cfg.model.ghost_batch_size
    assert (b_size, m, ghost) == (64, 40, 32)
    b = batch(b_size)
    imgs = torch.zeros((b_size, 4, 4, 3), dtype=torch.uint8)
    _, _, _, rows = worker_views(0, b, imgs, torch.as_tensor(b["label"]), per_copy=False,
                                 views=view_indices(m, cfg.batch_augmentation.mode, 0), ops=[], on_worker=True)
    ids = torch.as_tensor(rows["sample_id"])
    chunks = ids.split(ghost)  # GhostBatchNorm2d.forward normalises x.split(virtual_batch)
    assert len(chunks) == b_size * m // ghost
    assert all(len(set(c.tolist())) == len(c) for c in chunks)
    sample_major = ids.view(m, b_size).T.reshape(-1).split(ghost)  # the old layout fails this check
    assert len(set(sample_major[0].tolist())) == 1 and all(len(set(c.tolist())) <= 2 for c in sample_major)


def test_intermediate_batch_augmentation_views_differ_through_dropout():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 32), nn.Dropout(0.5), nn.Linear(32, 3)).train()
    x = make_views(torch.randint(0, 255, (4, 4, 4, 1), dtype=torch.uint8), np.zeros(8, np.uint64), 2, [])
    out = model(x.float())
    assert torch.equal(x[0], x[4]) and not torch.allclose(out[0], out[4])


def test_ranks_share_the_model_init_but_draw_their_own_dropout():
    cfg = PipelineConfig.model_validate({"model": {"dropout": 0.5}})
    nets, outs = [], []
    x = torch.randn(4, 1, 8, 8)
    for rank in range(3):
        torch.manual_seed(derive_seed(cfg.seed, STREAM_MODEL))
        nets.append(build_model(cfg.model, 1, 10).train())
        torch.manual_seed(dropout_seed(cfg.seed, rank))
        outs.append(nets[-1](x))
    for p0, p1 in zip(nets[0].parameters(), nets[2].parameters(), strict=True):
        assert torch.equal(p0, p1)
    assert not torch.allclose(outs[0], outs[1]) and not torch.allclose(outs[1], outs[2])
    torch.manual_seed(dropout_seed(cfg.seed, 1))
    assert torch.equal(nets[1](x), outs[1])  # a rank's stream is reproducible


def test_accumulated_views_give_the_m_times_b_gradient():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 5))
    x, y = torch.randn(4 * 3, 3, 2, 2), torch.randint(0, 5, (12,))
    grads = []
    for accumulate in (False, True):
        model.zero_grad()
        loss = backward_views(model, x, y, views=3, accumulate=accumulate)
        grads.append(([p.grad.clone() for p in model.parameters()], loss))
    (g_full, l_full), (g_acc, l_acc) = grads
    assert abs(l_full - l_acc) < 1e-6
    for a, b in zip(g_full, g_acc, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_accumulated_views_all_reduce_once_per_step_under_ddp(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        torch.manual_seed(1)
        model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Flatten(), nn.Linear(12, 5)))
        calls = []

        def counting_hook(state, bucket):
            calls.append(bucket.index())
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut

        model.register_comm_hook(None, counting_hook)
        x, y = torch.randn(16, 3, 2, 2), torch.randint(0, 5, (16,))
        backward_views(model, x, y, views=4, accumulate=True)
        assert len(calls) == 1  # one bucket, reduced once: passes 0-2 ran in no_sync()
        reference = nn.Sequential(nn.Flatten(), nn.Linear(12, 5))
        reference.load_state_dict(model.module.state_dict())
        backward_views(reference, x, y, views=4, accumulate=False)
        for a, b in zip(model.parameters(), reference.parameters(), strict=True):
            assert torch.allclose(a.grad, b.grad, atol=1e-6)
    finally:
        dist.destroy_process_group()


def test_step_counts_are_in_sample_units():
    assert step_counts(8, views=4, reads=True) == (32, 8)  # local M = 4 (or a batch-echo repeat)
    assert step_counts(8, views=1, reads=True) == (8, 8)  # grouped leader
    assert step_counts(8, views=1, reads=False) == (8, 0)  # grouped member


def _summary(mode: str, world: int, copies: int, steps: int, batch_size: int) -> dict:
    cfg = PipelineConfig.model_validate({"batch_augmentation": {"copies": copies, "mode": mode},
                                         "preprocess": {"augment": {"on": "worker"}},
                                         "scaling": {"num_workers": world}})
    readers = world // copies if mode == "grouped" else world
    views = 1 if mode == "grouped" else copies
    fresh, trained, samples = 0, 0, 0
    for rank in range(world):  # every rank's counters over `steps` steps of a BA-only run
        reads = mode == "local" or rank % copies == 0
        for _ in range(steps):
            t, s = step_counts(batch_size, views, reads)  # no echo: every read sample is fresh
            fresh, trained, samples = fresh + (batch_size if reads else 0), trained + t, samples + s
    assert fresh == steps * readers * batch_size
    final = {"fresh_examples": fresh, "trained_examples": trained, "trained_samples": samples,
             "world_size": world, "epochs": 1.0, "evaluations": 1, "steps": steps, "last_accuracy": 0.5, "best_accuracy": 0.5,
             "stop_reason": "x"}
    return build_summary(cfg, pipeline="p", run_dir=Path("."), mlflow_run_id="r", mlflow_uri="u", final=final,
                         collected={"source_reads": fresh}, t0=0.0, t_end=1.0)


def test_summary_reports_echo_factor_and_views_in_sample_units_for_both_modes():
    local, grouped = _summary("local", 2, 4, 10, 16), _summary("grouped", 8, 4, 10, 16)
    for s in (local, grouped):
        assert s["echo"]["measured_factor"] == 1.0
        assert s["batch_augmentation"]["views_per_sample"] == 4.0
    assert local["batch_augmentation"]["views_per_step"] == 2 * 16 * 4  # W x B x M
    assert grouped["batch_augmentation"]["views_per_step"] == 8 * 16  # W/M groups x M members x B
    assert grouped["batch_augmentation"]["samples_per_step"] == 2 * 16
    assert grouped["trained_samples"] == grouped["fresh_examples"] == 10 * 2 * 16


class LeftVsRight(nn.Module):
    """Class 0 when the left half is brighter: flipping a view flips its vote."""

    def forward(self, x):
        w = x.shape[-1] // 2
        return 50.0 * torch.stack([x[..., :w].mean((1, 2, 3)), x[..., w:].mean((1, 2, 3))], dim=1)


def test_tta_averages_distinct_augmented_views():
    n, views, ops = 64, 3, [AugmentOp(op="flip")]
    imgs = torch.zeros((n, 8, 8, 1), dtype=torch.uint8)
    imgs[:, :, :4] = 200  # left half bright: single view predicts class 0 for all
    ids = np.arange(n)
    normalize = Normalizer([0.0], [1.0], 1, "cpu")
    model = LeftVsRight()
    single = model(normalize(imgs)).argmax(1)
    assert (single == 0).all()
    tta = tta_predict(model, normalize, imgs, ids, 0, views, ops)
    keys = eval_view_keys(0, ids, views).reshape(views, n)
    assert all(len(set(keys[:, i].tolist())) == views for i in range(n))  # distinct augmentations
    flipped = np.stack([(augment_batch(imgs, keys[v], ops)[:, 0, 0, 0] == 0).numpy() for v in range(views)])
    expected = (flipped.sum(0) * 2 > views).astype(np.int64)  # the majority vote of the views
    assert np.array_equal(tta.numpy(), expected)
    assert 0 < expected.sum() < n  # TTA changes some predictions, not all: it does differ from single view


def test_ghost_batch_norm_normalises_each_virtual_batch():
    bn = GhostBatchNorm2d(2, virtual_batch=4).train()
    x = torch.randn(12, 2, 3, 3) * 3 + 1
    out = bn(x)
    for c in out.split(4):
        assert torch.allclose(c.mean(dim=(0, 2, 3)), torch.zeros(2), atol=1e-5)
    ref = nn.BatchNorm2d(2).train()
    assert not torch.allclose(out, ref(x))  # differs from whole-batch statistics
    model = use_ghost_batch_norm(nn.Sequential(nn.Conv2d(1, 2, 1), nn.BatchNorm2d(2)), 8)
    assert isinstance(model[1], GhostBatchNorm2d) and model[1].virtual_batch == 8


def test_eval_view_keys_deterministic_and_distinct():
    k = eval_view_keys(0, np.array([5, 6]), 4)
    assert len(set(k.tolist())) == 8 and np.array_equal(k, eval_view_keys(0, np.array([5, 6]), 4))
