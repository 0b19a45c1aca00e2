"""What the MLflow run page costs a run (echoray/tracking_datasets.py, tracking_model.py):
the dataset digest's time on the largest indexes of the tests (and a 20,000-file folder, the
listing a real image folder pays), and the time `mlflow.pytorch.load_model` takes to load a
logged model (the digits pipeline's small CNN, and CIFAR ResNet-20) from a sqlite store.
No Ray: the indexes and the models are built in this process.

    python benchmarks/mlflow_run_page.py    # -> benchmarks/results/mlflow_run_page.json
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from common import save

REPEATS = 5


def _timed(fn, repeats: int = REPEATS) -> dict:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "repeats": repeats}


def digests(tmp: Path) -> dict:
    from echoray.config import SourceConfig
    from echoray.data.fixtures import write_cifar10_bin, write_image_folder
    from echoray.data.sources import index_source
    from echoray.tracking_datasets import split_digest

    cases = {
        "digits_1797_in_memory": SourceConfig(kind="digits", image_size=None),
        "image_folder_200_files (test_bad_data)": SourceConfig(
            kind="image_folder", path=str(write_image_folder(tmp / "f200", n=200, classes=4, size=20)), image_size=20),
        "cifar10_bin_6_files_600_records": SourceConfig(
            kind="cifar10", path=str(write_cifar10_bin(tmp / "c", per_batch=100, batches=5, test=100)), image_size=32),
        "image_folder_20000_files": SourceConfig(
            kind="image_folder", path=str(write_image_folder(tmp / "f20k", n=20000, classes=10, size=8)), image_size=8),
    }
    out = {}
    for name, cfg in cases.items():
        idx = index_source(cfg)
        out[name] = {"train_examples": len(idx.train_ids), **_timed(lambda idx=idx: split_digest(idx, "train"))}
        print(name, out[name], flush=True)
    return out


def model_loads(tmp: Path) -> dict:
    import mlflow.pytorch
    import numpy as np
    from mlflow.tracking import MlflowClient

    from echoray.tracking_model import save_to_run
    from echoray.tracking_served import Normalized
    from echoray.train.models import CifarResNet, SmallCNN

    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("loads")

    class Logger:  # what save_to_run uses of tracking.RunLogger
        def __init__(self):
            self.uri, self.client, self.experiment_id = uri, client, exp
            self.run_id = client.create_run(exp).info.run_id

    out = {}
    for name, net, shape in (("small_cnn_digits_8x8x1", SmallCNN(1, 10, 32, 0.1), (2, 8, 8, 1)),
                             ("resnet20_cifar_32x32x3", CifarResNet(20, 3, 10, 0.0), (2, 32, 32, 3))):
        model = Normalized(net, [0.5] * shape[3], [0.25] * shape[3]).eval()
        t = time.perf_counter()
        model_uri = save_to_run(model, np.zeros(shape, np.uint8), Logger(), None)
        logged = time.perf_counter() - t
        out[name] = {"log_s": logged, **_timed(lambda u=model_uri: mlflow.pytorch.load_model(u))}
        print(name, out[name], flush=True)
    return out


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        result = {"digest": digests(tmp), "model_load": model_loads(tmp)}
    print(save("mlflow_run_page", result, args, repeats=REPEATS))


if __name__ == "__main__":
    main()
