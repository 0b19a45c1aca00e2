import numpy as np

from echoray.data.batching import pack_unique


def stream(n_items, e, batch, seed=0):
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(n_items), e)
    order = rng.permutation(len(ids))
    ids = ids[order]
    rows = {"epoch": np.zeros(len(ids), np.int64), "sample_id": ids, "x": ids * 7}
    return [{k: v[i : i + batch] for k, v in rows.items()} for i in range(0, len(ids), batch)]


def test_same_rows_same_batch_count_and_no_duplicates_inside_batches():
    src = stream(500, 2, 64)
    out = list(pack_unique(src, 64))
    total = sum(len(b["sample_id"]) for b in src)
    assert len(out) == total // 64 and all(len(b["sample_id"]) == 64 for b in out)
    emitted = np.concatenate([b["sample_id"] for b in out])
    assert np.all(np.bincount(emitted, minlength=500) <= 2)
    dup = [len(np.unique(b["sample_id"])) < 64 for b in out]
    before = [len(np.unique(b["sample_id"])) < len(b["sample_id"]) for b in src]
    assert sum(before) > 10 * max(sum(dup), 1) or sum(dup) == 0
    assert sum(dup[:-2]) == 0  # only the stream's tail may keep a pair
    for b in out:
        assert np.array_equal(b["x"], b["sample_id"] * 7)  # rows stay whole


def test_adjacent_copies_are_separated():
    ids = np.repeat(np.arange(256), 4)  # copies next to each other, no shuffling at all
    rows = {"epoch": np.zeros(1024, np.int64), "sample_id": ids}
    src = [{k: v[i : i + 32] for k, v in rows.items()} for i in range(0, 1024, 32)]
    out = list(pack_unique(src, 32))
    assert len(out) == 32
    dup = sum(len(np.unique(b["sample_id"])) < 32 for b in out)
    assert dup <= 3


def test_epochs_are_distinct_keys():
    rows = {"epoch": np.array([0, 1] * 16), "sample_id": np.repeat(np.arange(16), 2)}
    (out,) = list(pack_unique([rows], 32))
    assert len(out["sample_id"]) == 32


def test_max_carry_zero_only_rebatches_short_batches_to_exact_size():
    sizes = [512, 414, 512, 100, 300]
    rows, start = [], 0
    for n in sizes:
        rows.append({"epoch": np.zeros(n, np.int64), "sample_id": np.arange(start, start + n)})
        start += n
    out = list(pack_unique(rows, 512, max_carry=0))
    assert [len(b["sample_id"]) for b in out] == [512] * (sum(sizes) // 512)
    assert np.array_equal(np.concatenate([b["sample_id"] for b in out]), np.arange(len(out) * 512))
