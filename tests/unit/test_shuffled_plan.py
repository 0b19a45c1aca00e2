"""The read plan of a source that reads samples one by one: chunks are random draws.

A class-per-folder source lists its files class by class, so chunks of neighbouring
ids hold one or two classes; with shuffled reads every chunk mixes classes, every id
is read exactly once per epoch, and (seed, epoch) alone decides the order.
"""

import numpy as np

from echoray.config import AugmentOp, PipelineConfig, SourceConfig
from echoray.data.fixtures import decode_id, write_image_folder
from echoray.data.plan import ChunkMap, block_starts, num_chunks, read_plan, sample_order
from echoray.data.preprocess_args import preprocess_args
from echoray.data.sources import index_source
from echoray.data.stages import Preprocess

CLASSES, PER_CLASS, CHUNK = 10, 32, 32


def folder_index(tmp_path):
    root = write_image_folder(tmp_path / "imgs", n=CLASSES * PER_CLASS, classes=CLASSES, size=8)
    return index_source(SourceConfig(kind="image_folder", path=str(root), image_size=8, chunk_size=CHUNK))


def plan_chunks(idx, seed, epochs, shuffled, first_epoch=0):
    """[(epoch, ids)] per chunk of the whole plan, in plan order."""
    m = ChunkMap(idx.train_ids, CHUNK, seed, shuffled)
    out = []
    for b in read_plan(seed, epochs, num_chunks(len(idx.train_ids), CHUNK), block_chunks=3, first_epoch=first_epoch):
        out += list(zip(b["epoch"].tolist(), m.ids(b["epoch"], b["chunk"]), strict=True))
    return out


def classes_of(idx, ids):
    return idx.details["train"].take(ids)[1]


def test_image_folder_declares_shuffled_reads(tmp_path):
    assert folder_index(tmp_path).shuffled_reads is True
    assert index_source(SourceConfig(kind="digits")).shuffled_reads is False  # chunked: keeps its behaviour


def test_every_id_once_per_epoch_and_chunks_mix_classes(tmp_path):
    idx = folder_index(tmp_path)
    n = len(idx.train_ids)
    for shuffled in (False, True):
        chunks = plan_chunks(idx, seed=7, epochs=3, shuffled=shuffled)
        for e in range(3):
            ids = np.concatenate([c for ep, c in chunks if ep == e])
            assert len(ids) == n and np.array_equal(np.sort(ids), idx.train_ids)
        distinct = [len(np.unique(classes_of(idx, c))) for _, c in chunks if len(c) == CHUNK]
        if shuffled:
            assert min(distinct) >= 6  # 32 draws over 10 classes
        else:
            assert max(distinct) <= 3  # 32 neighbours span at most 3 folders of ~26 training files


def test_batches_without_a_shuffle_buffer_mix_classes(tmp_path):
    """The stream in plan order, batched by 64 with no buffer: every batch holds >= 8 classes."""
    idx = folder_index(tmp_path)
    ids = np.concatenate([c for _, c in plan_chunks(idx, seed=1, epochs=1, shuffled=True)])
    batches = [ids[s : s + 64] for s in range(0, len(ids) - 63, 64)]
    assert min(len(np.unique(classes_of(idx, b))) for b in batches) >= 8


def test_seed_and_epoch_decide_the_order_and_a_restored_plan_replays_it(tmp_path):
    idx = folder_index(tmp_path)
    a = plan_chunks(idx, seed=3, epochs=3, shuffled=True)
    again = plan_chunks(idx, seed=3, epochs=3, shuffled=True)
    assert all(x[0] == y[0] and np.array_equal(x[1], y[1]) for x, y in zip(a, again, strict=True))
    restored = plan_chunks(idx, seed=3, epochs=3, shuffled=True, first_epoch=1)
    tail = [c for c in a if c[0] >= 1]
    assert all(x[0] == y[0] and np.array_equal(x[1], y[1]) for x, y in zip(tail, restored, strict=True))
    n = len(idx.train_ids)
    assert np.array_equal(sample_order(3, 2, n), sample_order(3, 2, n))
    assert not np.array_equal(sample_order(3, 1, n), sample_order(3, 2, n))
    assert not np.array_equal(sample_order(3, 1, n), sample_order(4, 1, n))


def test_the_actor_reads_the_drawn_files_with_their_labels(tmp_path):
    idx = folder_index(tmp_path)
    cfg = PipelineConfig(source=SourceConfig(kind="image_folder", path="x", image_size=8, chunk_size=CHUNK))
    cfg.preprocess.augment.ops = [AugmentOp(op="flip", p=0.0)]
    stage = Preprocess(preprocess_args(cfg, idx))
    plan = {"epoch": np.array([0, 0]), "chunk": np.array([0, 1])}
    rows = next(stage(plan))
    want = np.concatenate(ChunkMap(idx.train_ids, CHUNK, cfg.seed, True).ids(plan["epoch"], plan["chunk"]))
    assert np.array_equal(rows["sample_id"], want)
    assert np.array_equal(rows["label"], classes_of(idx, want))
    files = idx.details["train"].take(want)[0]
    assert [decode_id(img) for img in rows["image"]] == [int(f.rsplit("_", 1)[1][:5]) for f in files]


def test_first_blocks_are_small_then_full():
    assert block_starts(20, 8, first_chunks=2, n_first=3) == [0, 2, 4, 6, 14]
    assert block_starts(20, 8) == [0, 8, 16]
    blocks = read_plan(0, 2, 10, block_chunks=8, first_chunks=2, n_first=3)
    assert [len(b["chunk"]) for b in blocks] == [2, 2, 2, 8, 6]
    assert sorted(np.concatenate([b["chunk"] for b in blocks]).tolist()) == sorted(list(range(10)) * 2)


def test_block_chunks_cap():
    from echoray.data.pipeline import plan_block_chunks

    assert plan_block_chunks(1710, 2) == 214  # chunked sources: 4 blocks per actor over the plan
    assert plan_block_chunks(1710, 2, max_chunks=16) == 16  # file-by-file sources: 8 actor calls a block
    assert plan_block_chunks(10, 32, max_chunks=16) == 1
