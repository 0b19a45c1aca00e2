"""The examples run as a user runs them (subprocesses), with exact counts:
fresh examples = the distinct (epoch, sample) trained; one view per group member; the ids
each rank saw (examples/ray_train_loop.py, my_model.yaml, my_reader.yaml)."""

import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import ray

from helpers import REPO


def env(*extra):
    """RAY_ADDRESS of the tests' local Ray, as a `ray job submit` driver has it (no Ray start
    and stop of its own; its workers have examples/ on their PYTHONPATH, tests/conftest.py,
    as the YAML examples ask of every node); `extra` on the driver's own PYTHONPATH."""
    paths = [str(REPO / "platform"), *map(str, extra), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), "RAY_TRAIN_V2_ENABLED": "1",
            "RAY_ADDRESS": ray.get_runtime_context().gcs_address}


def run(args, cwd, extra_path=()):
    out = subprocess.run([sys.executable, *args], cwd=cwd, env=env(*extra_path), capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-6000:])
    return out


def test_ray_train_loop_example_counts_exactly(local_ray, tmp_path):
    sys.path.insert(0, str(REPO / "platform"))
    import echoray.data as ed
    import echoray.train as et

    run([str(REPO / "examples" / "ray_train_loop.py"), "--out", str(tmp_path / "out")], tmp_path)
    ranks = [json.loads((tmp_path / "out" / f"rank{r}.json").read_text()) for r in range(2)]
    leader, member = ranks
    assert (leader["member"], leader["reads"], member["member"], member["reads"]) == (0, True, 1, False)
    rows = [tuple(r[:3]) for r in leader["rows"]]
    assert rows == [tuple(r[:3]) for r in member["rows"]]  # the same samples, in the same order
    assert leader["steps"] == member["steps"] == len(rows) // 16

    ids, epochs = np.arange(96), np.repeat(np.arange(2), 96)
    copies = ed.expected_copies(np.tile(ids, 2), epochs, 1.5, seed=0)  # what the echo makes
    assert len(rows) == int(copies.sum()) // 16 * 16  # every full batch of the echoed stream trained
    seen = Counter((e, i) for e, i, _ in rows)
    expected = {(int(e), int(i)): int(c) for e, i, c in zip(epochs, np.tile(ids, 2), copies, strict=True)}
    assert all(n <= expected[p] for p, n in seen.items())
    assert sum(expected.values()) - len(rows) == sum(expected[p] - seen.get(p, 0) for p in expected)
    assert leader["fresh_total"] == member["fresh_total"] == len(seen) == leader["fresh_local"]
    assert member["fresh_local"] == 0

    for rank in ranks:  # one view per member: its keys are view `member` of each row
        batch = {"epoch": np.array([r[0] for r in rank["rows"]]), "sample_id": np.array([r[1] for r in rank["rows"]]),
                 "echo_copy": np.array([r[2] for r in rank["rows"]])}
        keys = et.view_keys(0, batch, et.group_layout(rank["rank"], 2, 2), per_copy=True)
        assert [r[3] for r in rank["rows"]] == keys.tolist()
    assert all(a[3] != b[3] for a, b in zip(leader["rows"], member["rows"], strict=True))


YAML_RUNS = """
import json, sys
import echoray.api
from echoray.runtime.session import start_ray
start_ray()
uri, npy, out = sys.argv[1:4]
base = {"tracking.uri": uri, "train.target": None, "train.max_epochs": 2, "audit.enabled": True}
echoray.api.train("examples/my_model.yaml", {**base, "source.limit": 256}, out=out + "/model")  # a Ray Train worker's ops
base["scaling.local_mode"] = True  # the reader's and the Dataset's runs train in this process
echoray.api.train("examples/my_reader.yaml", {**base, "source.path": npy, "source.limit": 192}, out=out + "/reader")
import numpy as np, ray
images, labels = np.load(npy + "/images.npy"), np.load(npy + "/labels.npy")
ds = ray.data.from_items([{"image": im, "label": int(y), "key": 1000 + 3 * i}
                          for i, (im, y) in enumerate(zip(images, labels))])
echoray.api.train(None, {**base, "source.limit": 128, "echo.stage": "after_augment", "echo.factor": 1.5},
              out=out + "/dataset", dataset=ds, id_column="key")
"""


def test_custom_model_ops_and_reader_through_the_yaml(local_ray, tmp_path, sqlite_uri):
    sys.path.insert(0, str(REPO / "examples"))
    from my_reader import write_digits

    npy = write_digits(tmp_path / "npy")
    run(["-c", YAML_RUNS, sqlite_uri, str(npy), str(tmp_path)], REPO,
        extra_path=[REPO / "examples"])

    model = json.loads((tmp_path / "model" / "summary.json").read_text())
    t = pq.read_table(tmp_path / "model" / "audit.parquet").to_pydict()
    pairs = list(zip(t["epoch"], t["sample_id"], strict=True))
    assert model["fresh_examples"] == len(set(pairs)) == model["trained_examples"] == len(pairs) == 2 * 256
    assert "name: my_model:mlp" in (tmp_path / "model" / "config.yaml").read_text()

    reader = json.loads((tmp_path / "reader" / "summary.json").read_text())
    t = pq.read_table(tmp_path / "reader" / "audit.parquet").to_pydict()
    counts = Counter(zip(t["epoch"], t["sample_id"], strict=True))
    assert reader["fresh_examples"] == len(counts) == 2 * 192  # each (epoch, sample) of the reader's ids
    assert set(counts.values()) == {2} and reader["trained_examples"] == 4 * 192  # echo factor 2
    from echoray.config_load import load_config
    from echoray.data.sources import index_source

    idx = index_source(load_config(REPO / "examples" / "my_reader.yaml", [f"source.path={npy}",
                                                                          "source.limit=192"]).source)
    assert {i for _, i in counts} == set(idx.train_ids.tolist())

    ds_run = json.loads((tmp_path / "dataset" / "summary.json").read_text())
    t = pq.read_table(tmp_path / "dataset" / "audit.parquet").to_pydict()
    counts = Counter(zip(t["epoch"], t["sample_id"], strict=True))
    assert ds_run["fresh_examples"] == len(counts)  # fresh = distinct (epoch, sample) trained
    ids = {i for _, i in counts}
    assert len(ids) == 128 and all(i >= 1000 and (i - 1000) % 3 == 0 for i in ids)  # the user's id column
    assert ds_run["trained_examples"] == len(t["sample_id"]) and set(counts.values()) <= {1, 2}
