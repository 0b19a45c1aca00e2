"""Grouped batch augmentation on text: the group's reader broadcasts token rows (no labels)
to its members over gloo (two processes), and each member then trains its own copy."""

import numpy as np
import torch.multiprocessing as mp


def _member(rank: int, store_path: str, out):
    import torch
    import torch.distributed as dist

    from echoray.train.groups import INT_FIELDS, broadcast_batches

    dist.init_process_group("gloo", store=dist.FileStore(store_path, 2), rank=rank, world_size=2)
    fields = tuple(f for f in INT_FIELDS if f != "label")
    src = None
    if rank == 0:
        rng = np.random.default_rng(0)
        src = [{"tokens": rng.integers(0, 257, (4, 9)).astype(np.uint16), "epoch": np.zeros(4, np.int64),
                "sample_id": np.arange(4) + 4 * b, "echo_copy": np.zeros(4, np.int64),
                "echo_copies": np.ones(4, np.int64), "aug_key": np.arange(4) * 7} for b in range(3)]
    got = list(broadcast_batches(src, dist.new_group([0, 1], backend="gloo"), 0, (9,), 4, field="tokens",
                                 dtype=torch.int32, int_fields=fields))
    out.put((rank, [(b["tokens"].tolist(), b["sample_id"].tolist(), sorted(b)) for b in got]))
    dist.destroy_process_group()


def test_a_group_leader_broadcasts_token_rows_to_its_member(tmp_path):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_member, args=(r, str(tmp_path / "store"), out)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert results[0] == results[1] and len(results[0]) == 3
    tokens, ids, keys = results[1][2]
    assert ids == [8, 9, 10, 11] and np.asarray(tokens).shape == (4, 9) and "label" not in keys
