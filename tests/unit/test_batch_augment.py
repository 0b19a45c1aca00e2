import numpy as np
import torch
from torch import nn

from echoray.config import AugmentOp
from echoray.train.batch_augment import backward_views, eval_view_keys, make_views, view_keys
from echoray.train.ghost_bn import GhostBatchNorm2d, use_ghost_batch_norm

OPS = [AugmentOp(op="random_crop", padding=2), AugmentOp(op="flip")]


def batch(n=8):
    return {"epoch": np.zeros(n, np.int64), "sample_id": np.arange(n) + 100, "echo_copy": np.zeros(n, np.int64)}


def test_view_keys_distinct_per_view_and_per_group_member():
    k0 = view_keys(0, batch(), per_copy=False, member=0, copies=4)
    k1 = view_keys(0, batch(), per_copy=False, member=1, copies=4)
    assert len(k0) == 32 and len(set(k0.tolist())) == 32
    assert not set(k0.tolist()) & set(k1.tolist())
    assert np.array_equal(k0, view_keys(0, batch(), False, 0, 4))
    # M = 1 on the worker matches the CPU path's key for the same sample
    from echoray.data.stages import augment_keys

    assert np.array_equal(view_keys(0, batch(), False, 0, 1), augment_keys(0, batch(), False))


def test_make_views_are_sample_major_and_differ():
    imgs = torch.randint(0, 255, (8, 16, 16, 1), dtype=torch.uint8)
    keys = view_keys(0, batch(), False, 0, 3)
    views = make_views(imgs, keys, 3, OPS)
    assert views.shape == (24, 16, 16, 1)
    differ = sum(not torch.equal(views[3 * i], views[3 * i + 1]) for i in range(8))
    assert differ >= 6
    plain = make_views(imgs, keys, 3, [])
    assert torch.equal(plain[0], plain[1]) and torch.equal(plain[0], imgs[0]) and torch.equal(plain[3], imgs[1])


def test_intermediate_batch_augmentation_views_differ_through_dropout():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 32), nn.Dropout(0.5), nn.Linear(32, 3)).train()
    x = make_views(torch.randint(0, 255, (4, 4, 4, 1), dtype=torch.uint8), np.zeros(8, np.uint64), 2, [])
    out = model(x.float())
    assert torch.equal(x[0], x[1]) and not torch.allclose(out[0], out[1])


def test_accumulated_views_give_the_m_times_b_gradient():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 5))
    x, y = torch.randn(4 * 3, 3, 2, 2), torch.randint(0, 5, (12,))
    grads = []
    for accumulate in (False, True):
        model.zero_grad()
        loss = backward_views(model, x, y, copies=3, accumulate=accumulate)
        grads.append(([p.grad.clone() for p in model.parameters()], loss))
    (g_full, l_full), (g_acc, l_acc) = grads
    assert abs(l_full - l_acc) < 1e-6
    for a, b in zip(g_full, g_acc, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


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
