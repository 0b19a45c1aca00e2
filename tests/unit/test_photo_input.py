"""The photo input path: concurrent reads, the full-image random-resized crop, scaled
JPEG decode, and the reads in flight a source gets."""

import io
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from echoray.config import AugmentOp, SourceConfig
from echoray.data.augment_np import CROP_RATIO, CROP_SCALE, crop_boxes
from echoray.data.decode import decode_full
from echoray.data.fixtures import write_jpeg_folder
from echoray.data.full_crop import crop_decoder, crop_each
from echoray.data.sources import index_source, open_reader
from echoray.data.sources.concurrent import ConcurrentReads
from echoray.seeds import mix

RRC = AugmentOp(op="random_resized_crop", size=32)


def photo_jpeg(w=500, h=375, seed=0) -> bytes:
    rng = np.random.default_rng(seed)
    ys, xs = np.mgrid[0:h, 0:w]
    img = 120 + 80 * np.sin(xs[..., None] / 37.0 + ys[..., None] / 53.0 + rng.uniform(0, 6, 3))
    img = img + rng.normal(0, 10, (h, w, 3))
    buf = io.BytesIO()
    Image.fromarray(img.clip(0, 255).astype(np.uint8)).save(buf, "JPEG", quality=90)
    return buf.getvalue()


@pytest.fixture(scope="module")
def jpeg_root(tmp_path_factory):
    return write_jpeg_folder(tmp_path_factory.mktemp("jpg"), n=40)


def test_concurrent_reader_returns_the_sequential_rows_in_request_order(jpeg_root):
    ids = np.random.default_rng(1).permutation(30)
    out = {}
    for conc in (1, 8):
        idx = index_source(SourceConfig(kind="image_folder", path=str(jpeg_root), image_size=32,
                                        holdout_fraction=0.25))
        idx.read_concurrency = conc  # what a reader's index may declare
        reader = open_reader(idx)
        plain = reader.read(idx.train_ids[ids], "train")
        cropped = reader.read_skipping(idx.train_ids[ids], "train", decoder=crop_decoder(mix(3, ids), RRC, 3))
        out[conc] = (plain, cropped)
    (p1, c1), (p8, c8) = out[1], out[8]
    assert np.array_equal(p1[0], p8[0]) and np.array_equal(p1[1], p8[1])
    assert p1[0].shape == (30, 32, 32, 3)
    assert np.array_equal(c1.images, c8.images) and np.array_equal(c1.labels, c8.labels)
    assert c1.kept.all() and c1.images.shape == (30, 32, 32, 3)


def test_full_image_crop_shape_and_key_determinism():
    data = photo_jpeg()
    keys = mix(5, np.arange(6))
    a = np.stack([crop_decoder(keys, RRC, 3)(i, data, "x") for i in range(6)])
    b = np.stack([crop_decoder(keys, RRC, 3)(i, data, "x") for i in range(6)])
    assert a.shape == (6, 32, 32, 3) and a.dtype == np.uint8
    assert np.array_equal(a, b)  # same key, same crop
    assert len({x.tobytes() for x in a}) == 6  # different keys, different crops


def test_crops_reach_every_border_of_the_full_image_symmetrically():
    """Over 20,000 keys on a 500x375 image: each 10-pixel border strip is inside > 5% of the
    crops (measured 7% left/right, 41% top/bottom), the 62 columns a centre-cropped
    square never shows are inside > 30% (measured 40%), and opposite strips are hit
    equally often within 4 standard errors."""
    w, h, n = 500, 375, 20_000
    x0, y0, cw, ch = crop_boxes(mix(11, np.arange(n)), 0, w, h, CROP_SCALE, CROP_RATIO)
    assert (cw >= 1).all() and (cw <= w).all() and (ch <= h).all() and (x0 >= 0).all() and (x0 + cw <= w).all()
    left, right = (x0 < 10).mean(), (x0 + cw > w - 10).mean()
    top, bottom = (y0 < 10).mean(), (y0 + ch > h - 10).mean()
    for p in (left, right, top, bottom):
        assert p > 0.05
    assert (x0 < (w - h) / 2).mean() > 0.3
    se = np.sqrt(2 * 0.5 * 0.5 / n)
    assert abs(left - right) < 4 * se and abs(top - bottom) < 4 * se
    area = cw * ch / (w * h)  # boxes unclamped by the image follow the op's scale range
    free = (cw < w) & (ch < h)
    assert area[free].min() >= CROP_SCALE[0] - 1e-9 and area.max() <= 1.0


def test_scaled_decode_matches_full_decode_then_crop_within_tolerance():
    """The fused path decodes at 1/2..1/8 DCT scale when the crop is much larger than the
    output; against a full decode cropped with the same box the mean absolute pixel
    difference stays under 6 of 255 per image and 3.5 overall (measured on this strongly
    textured image: 4.4 worst, 2.6 overall)."""
    data = photo_jpeg()
    keys = mix(7, np.arange(100))
    fused = np.stack([crop_decoder(keys, RRC, 3)(i, data, "x") for i in range(100)]).astype(int)
    full = np.empty(100, object)
    for i in range(100):
        full[i] = decode_full(data, 3, "x")
    ref = crop_each(full, keys, RRC, 3).astype(int)
    per_image = np.abs(fused - ref).reshape(100, -1).mean(1)
    assert per_image.max() < 6.0 and per_image.mean() < 3.5


def test_real_requests_in_flight_overlap():
    """The pool the reader uses keeps exactly 16 requests in flight: each request waits at a
    16-party barrier, which only opens when 16 are running at once (twice for 32 requests;
    with fewer in flight it would break after its timeout), and never more than 16 run."""
    import threading

    pool = ConcurrentReads(16)
    barrier, lock, running, peak = threading.Barrier(16, timeout=60), threading.Lock(), [0], [0]

    def request(i):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        barrier.wait()
        with lock:
            running[0] -= 1
        return i

    assert pool.map(request, range(32)) == list(range(32))
    assert peak[0] == 16 and not barrier.broken


def test_held_out_split_is_decoded_once_within_the_cache_bound(jpeg_root, monkeypatch):
    """The bound counts what the cache holds (centre crops at the model's input size): a
    share that fits is read once per run, one that does not is re-read per evaluation."""
    import torch

    from echoray.data import held_out
    from echoray.train import evaluate as ev

    idx = index_source(SourceConfig(kind="image_folder", path=str(jpeg_root), image_size=32,
                                    holdout_fraction=0.25))
    n_eval = len(idx.eval_ids)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(24 * 24 * 3, 4))
    normalize = ev.Normalizer(None, None, 3, "cpu")
    for limit, reads_per_eval in ((n_eval * 24 * 24 * 3, 0), (n_eval * 24 * 24 * 3 - 1, 1)):
        monkeypatch.setattr(held_out, "CACHE_LIMIT_BYTES", limit)  # fits at 24x24, not at the 32x32 decode
        es = ev.EvalSet(idx, 0, 1, out_size=24)
        calls = []

        def counted(ids, split, _read=es.reader.read_skipping, _calls=calls, **kw):
            _calls.append(len(ids))
            return _read(ids, split, **kw)

        es.reader.read_skipping = counted
        results = [es.evaluate(model, normalize, 8) for _ in range(3)]
        assert len(calls) == 3 * reads_per_eval and results[0] == results[1] == results[2]
        assert results[0][1] == n_eval


# crop_boxes of keys mix(0, 0..5) on these sizes, as data/augment.py computed them before the
# boxes moved to numpy (commit a22591d): replay and the audit's aug_key depend on them.
PINNED_BOXES = [
    ((500, 375), (65.36370275053105, 0.0, 349.00084043313564, 375.0)),
    ((375, 500), (14.49554115068103, 27.54313844991256, 310.0388742995335, 304.2704262350423)),
    ((640, 480), (200.29501314923488, 9.078282132887836, 368.23499521595613, 433.34589866807664)),
    ((500, 375), (125.02135384829003, 8.671280433031718, 370.44342344486887, 353.52823973413797)),
    ((1024, 768), (171.00497176905597, 31.736406041465287, 756.7627651684497, 649.4808276806727)),
    ((333, 500), (0.390790810043813, 75.05589560564239, 332.042970350273, 406.5913567788317)),
]


def test_crop_boxes_are_pinned_per_image_and_per_batch():
    """The same seeds give the same boxes, exactly: one image at a time (box_fn, crop_each's
    path), the whole batch at once (crop_boxes), and the batch's draws placed per image
    (box_at, the actor's decode path)."""
    from echoray.data.augment_np import crop_draws
    from echoray.data.full_crop import CROP_OP_INDEX, box_at, box_fn

    op = AugmentOp(op="random_resized_crop", size=224)
    keys = mix(0, np.arange(6))
    sizes = np.array([s for s, _ in PINNED_BOXES])
    batch = crop_boxes(keys, CROP_OP_INDEX, sizes[:, 0], sizes[:, 1], CROP_SCALE, CROP_RATIO)
    draws = crop_draws(keys, CROP_OP_INDEX, CROP_SCALE, CROP_RATIO)
    for n, ((w, h), box) in enumerate(PINNED_BOXES):
        assert box_fn(keys[n], op)(w, h) == box
        assert tuple(float(v[n]) for v in batch) == box
        assert box_at(draws, n, w, h) == box


def test_flip_made_at_decode_is_the_flip_op_bit_for_bit():
    """crop_decoder with the pipeline's flip mirrors exactly the images augment_np.flip
    (op 1 of the same keys) mirrors afterwards, and only those (about half of 64)."""
    from echoray.data.augment_np import flip, flip_mask
    from echoray.data.full_crop import decoded_ops

    flip_op = AugmentOp(op="flip", p=0.5)
    data = photo_jpeg()
    keys = mix(9, np.arange(64))
    plain = np.stack([crop_decoder(keys, RRC, 3)(i, data, "x") for i in range(64)])
    fused = np.stack([crop_decoder(keys, RRC, 3, flip_op)(i, data, "x") for i in range(64)])
    assert np.array_equal(fused, flip(plain, keys, 1, 0.5))
    mirrored = flip_mask(keys, 1, 0.5)
    assert 16 < mirrored.sum() < 48 and not np.array_equal(fused[mirrored], plain[mirrored])
    assert np.array_equal(fused[~mirrored], plain[~mirrored])
    assert decoded_ops([RRC, flip_op], per_copy=False) == 2
    assert decoded_ops([RRC, flip_op], per_copy=True) == 1  # echo before augmentation: crop_each
    assert decoded_ops([RRC, AugmentOp(op="cutout", size=8)], per_copy=False) == 1


def test_photo_actor_never_imports_torch(jpeg_root):
    """A preprocessing actor of the ImageNet pipeline (crop at decode, flip) reads, crops and
    flips a batch without importing torch: 1.4 s of its start, before the first batch.
    In a fresh interpreter, as a Ray worker process is."""
    import subprocess
    import sys

    code = f"""
import sys
import numpy as np
from echoray.config_load import load_config
from echoray.data.preprocess_args import preprocess_args
from echoray.data.sources import index_source
from echoray.data.stages import Preprocess
cfg = load_config("pipelines/imagenet_resnet50.yaml", ["source.path={jpeg_root}", "source.eval_path=null",
                  "source.holdout_fraction=0.25", "source.chunk_size=4"])
idx = index_source(cfg.source)
actor = Preprocess(preprocess_args(cfg, idx, None, None))
rows = next(actor({{"epoch": np.zeros(2, np.int64), "chunk": np.arange(2)}}))
print(rows["image"].shape, actor.first, "torch" in sys.modules)
"""
    import echoray

    platform = Path(echoray.__file__).parents[1]
    env = {**os.environ, "PYTHONPATH": str(platform)}
    out = subprocess.run([sys.executable, "-c", code], cwd=platform.parent, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == "(8, 224, 224, 3) 2 False"


def test_reads_in_flight_are_16_over_a_network_and_one_on_local_files(jpeg_root):
    from echoray.data.sources import reads_in_flight

    assert reads_in_flight("/data/imagenet") == reads_in_flight("file:///data/imagenet") == reads_in_flight(None) == 1
    assert reads_in_flight("s3://bucket/imagenet") == reads_in_flight("gs://bucket/imagenet") == 16
    local = index_source(SourceConfig(kind="image_folder", path=str(jpeg_root), image_size=32))
    assert local.read_concurrency == 1  # decided where the reader declared none
