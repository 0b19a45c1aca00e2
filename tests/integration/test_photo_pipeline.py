"""Photos through the whole path on a local Ray: a JPEG folder of mixed image sizes,
random-resized crops of the full images made in the actors, exact accounting from
the audit, the shared file index, and `echoray bench-input`."""

import json
import pickle
from collections import Counter, defaultdict

import numpy as np
import ray

from echoray.cli import main
from echoray.config_load import load_config
from echoray.data.fixtures import write_jpeg_folder
from echoray.data.full_crop import crop_decoder
from echoray.data.sources import index_source
from echoray.data.sources.file_table import FileTable, publish_index
from echoray.data.stages import augment_keys

CROP = "preprocess.augment.ops=[{op: random_resized_crop, size: 24}, {op: flip}]"


def photo_overrides(root, *extra):
    return ["source.kind=image_folder", f"source.path={root}", "source.image_size=32", "source.chunk_size=8",
            "source.holdout_fraction=0.25", CROP, *extra]


def test_echoed_copies_each_crop_the_full_image_and_counts_are_exact(run_pipeline, tmp_path):
    root = write_jpeg_folder(tmp_path / "jpg", n=64)
    overrides = photo_overrides(root, "train.max_epochs=2", "train.target=null", "audit.enabled=true",
                                "train.batch_size=8", "echo.stage=before_augment", "echo.factor=2",
                                "model.width=8",
                                # in the test's process, as `echoray train` on a local Ray it
                                # started (the same stream and counts, test_warm_trials)
                                "scaling.local_mode=true")
    summary, audit = run_pipeline(None, *overrides, name="photos")
    train_ids = index_source(load_config(None, overrides).source).train_ids
    t = audit.to_pydict()
    copies = Counter(zip(t["epoch"], t["sample_id"], strict=True))
    assert set(copies) == {(e, int(i)) for e in range(2) for i in train_ids}
    assert set(copies.values()) == {2}
    keys = defaultdict(set)
    for e, i, k in zip(t["epoch"], t["sample_id"], t["aug_key"], strict=True):
        keys[(e, i)].add(k)
    assert {len(v) for v in keys.values()} == {2}  # each copy its own crop of the full image
    assert summary["fresh_examples"] == 2 * len(train_ids) and summary["trained_examples"] == audit.num_rows
    n_eval = len(index_source(load_config(None, overrides).source).eval_ids)
    assert n_eval == 16  # 64 files, source.holdout_fraction=0.25
    correct = round(summary["metric"]["value"] * n_eval)  # a count of correct held-out photos
    assert summary["metric"]["value"] == correct / n_eval and 0 <= correct <= n_eval


def test_each_row_is_the_crop_its_key_names(local_ray, tmp_path):
    """The Ray Data stream itself: every image is the crop of the full photo that its
    (seed, epoch, sample id) key selects, bit for bit."""
    from echoray.data.pipeline import build_train_dataset

    root = write_jpeg_folder(tmp_path / "jpg", n=32)
    cfg = load_config(None, photo_overrides(root, "preprocess.augment.ops=[{op: random_resized_crop, size: 24}]",
                                            "train.max_epochs=2"))
    idx = publish_index(index_source(cfg.source))
    rows = build_train_dataset(cfg, idx).take_all()
    assert Counter((r["epoch"], r["sample_id"]) for r in rows) == Counter(
        {(e, int(i)): 1 for e in range(2) for i in idx.train_ids})
    files = idx.details["train"].paths()
    for r in rows:
        key = augment_keys(cfg.seed, {"epoch": np.array([r["epoch"]]), "sample_id": np.array([r["sample_id"]])},
                           per_copy=False)
        data = open(files[r["sample_id"]], "rb").read()
        expected = crop_decoder(key, cfg.preprocess.augment.ops[0], 3)(0, data, "x")
        assert r["image"].shape == (24, 24, 3) and np.array_equal(r["image"], expected)


@ray.remote
def _read_back(table: FileTable, ids):
    return table.take(np.asarray(ids))


def test_published_file_list_is_not_in_the_pickled_index(local_ray, tmp_path):
    """200,000 paths: the published index pickles to its id arrays plus under 4 KB, and a
    Ray task reads the paths back from the object store."""
    root = write_jpeg_folder(tmp_path / "jpg", n=8)
    idx = index_source(load_config(None, photo_overrides(root)).source)
    n = 200_000
    paths = [f"{root}/n{i % 1000:08d}/n{i % 1000:08d}_{i}.JPEG" for i in range(n)]
    big = FileTable(str(root), paths, np.arange(n) % 1000)
    idx.details["train"] = big
    idx.train_ids = np.arange(n, dtype=np.int64)
    before = len(pickle.dumps(idx))
    shared = publish_index(idx)
    after = len(pickle.dumps(shared))
    ids_bytes = shared.train_ids.nbytes + shared.eval_ids.nbytes
    assert before > ids_bytes + 2_000_000  # the paths travelled with the index
    assert after < ids_bytes + 4096
    got_paths, got_labels = ray.get(_read_back.remote(shared.details["train"], [0, 123_456, n - 1]))
    assert got_paths == [paths[0], paths[123_456], paths[-1]] and got_labels.tolist() == [0, 456, 999]


def test_bench_input_prints_rates_and_ends_with_one_json_line(local_ray, tmp_path, capsys):
    root = write_jpeg_folder(tmp_path / "jpg", n=64)
    args = ["bench-input"]
    for o in photo_overrides(root, "train.batch_size=8", "preprocess.actors.num_cpus=0.5"):
        args += ["--set", o]
    assert main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads(lines[-1])
    assert set(result) == {"examples_per_s", "first_batch_s", "after_first_batch_examples_per_s",
                           "images_per_actor_cpu_s", "images_per_cpu_s", "load_avg_1m_start", "actors", "cpus"}
    assert result["examples_per_s"] > 0 and result["first_batch_s"] > 0
    assert result["after_first_batch_examples_per_s"] > 0  # 6 batches; the CPU figures may be null so early
    assert any(line.startswith("[echoray]   after the first batch: ") for line in lines)
    assert result["actors"] == 1 and result["cpus"] == 0.5
    n_train = 48  # 64 files, a quarter held out; one epoch in batches of 8 (drop_last)
    assert any(f"({n_train // 8} batches of 8" in line for line in lines)
    assert any(line.startswith("[echoray]   stage upstream: 48 rows") for line in lines)
