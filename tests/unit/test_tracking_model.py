"""The model a run logs (echoray/tracking_model.py): from the run's latest checkpoint, in
MLflow's pt2 format, loadable with mlflow.pytorch.load_model and giving the trained
network's logits on what a reader yields; registered under tracking.register_model; a
search registers its best trial's."""

import json

import mlflow.pytorch
import numpy as np
import torch
from mlflow.tracking import MlflowClient

from echoray.config_load import load_config
from echoray.data.sources import index_source, open_reader
from echoray.records import CheckpointMeta
from echoray.tracking import RunLogger
from echoray.tracking_model import log_trained_model, save_to_run, served_model
from echoray.train import checkpoint
from echoray.train.checkpoint_store import CheckpointStore
from echoray.train.evaluate import Normalizer
from echoray.train.models import build_model
from echoray.tune.mlflow_runs import register_search_model


def _checkpoint(store: CheckpointStore, net, epoch: int) -> None:
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    meta = CheckpointMeta(evals=epoch, steps=10 * epoch, first_open_pass=0, world_size=1, state={})
    store.save({"epoch": epoch}, checkpoint.write(0, net, opt, meta, {}, {}, None))


def _run(tmp_path, sqlite_uri, *overrides):
    cfg = load_config(None, [f"tracking.uri={sqlite_uri}", "model.name=small_cnn", *overrides])
    idx = index_source(cfg.source)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    storage = str(tmp_path / "storage")
    (run_dir / "run.json").write_text(json.dumps({"ray_train_storage": storage, "trainer": "local_mode"}))
    logger = RunLogger(sqlite_uri, "models")
    logger.start("run", params={}, tags={})
    return cfg, idx, run_dir, storage, logger


def test_latest_checkpoint_is_logged_and_predicts_as_trained(tmp_path, sqlite_uri):
    cfg, idx, run_dir, storage, logger = _run(tmp_path, sqlite_uri, "tracking.register_model=digits-cnn")
    store = CheckpointStore(storage, None)
    nets = []
    for epoch in (1, 2):
        torch.manual_seed(epoch)
        nets.append(build_model(cfg.model, idx.channels, idx.num_classes, idx.image_size).eval())
        _checkpoint(store, nets[-1], epoch)
    uri = log_trained_model(cfg, idx, logger, run_dir, {"epochs": 2})
    logger.end("FINISHED")
    model = mlflow.pytorch.load_model(uri)
    images, _ = open_reader(idx).read(idx.eval_ids[:7], "eval")
    normalize = Normalizer(cfg.preprocess.mean, cfg.preprocess.std, idx.channels, "cpu")
    with torch.no_grad():
        got = model(torch.from_numpy(images))
        want = nets[1](normalize(torch.from_numpy(images)))  # the latest checkpoint's network
    assert tuple(got.shape) == (7, 10)
    assert torch.allclose(got, want, atol=1e-5)
    client = MlflowClient(sqlite_uri)
    (logged,) = client.get_run(logger.run_id).outputs.model_outputs
    assert uri == f"models:/{logged.model_id}"
    made = client.get_logged_model(logged.model_id)
    assert made.tags["echoray.checkpoint_epoch"] == "2"
    assert made.experiment_id == logger.experiment_id  # where the run page looks for it
    (version,) = client.search_model_versions("name = 'digits-cnn'")
    assert version.run_id == logger.run_id and str(version.version) == "1"


def test_no_checkpoint_no_model(tmp_path, sqlite_uri, capsys):
    cfg, idx, run_dir, _, logger = _run(tmp_path, sqlite_uri)
    assert log_trained_model(cfg, idx, logger, run_dir, {"epochs": 1}) is None
    assert "no model logged" in capsys.readouterr().out
    assert not MlflowClient(sqlite_uri).get_run(logger.run_id).outputs.model_outputs


def test_search_registers_its_best_trial(tmp_path, sqlite_uri):
    cfg, idx, _, _, parent = _run(tmp_path, sqlite_uri)
    trials = []
    for k in range(3):
        trial = RunLogger(sqlite_uri, "models")
        trial.start(f"t{k}", params={}, tags={}, parent_run_id=parent.run_id)
        net = served_model(cfg, idx, build_model(cfg.model, idx.channels, idx.num_classes, idx.image_size).state_dict())
        save_to_run(net, np.zeros((2, 8, 8, 1), np.uint8), trial, None)
        trial.end("FINISHED")
        trials.append(trial.run_id)
    best = {0: None, 1: 640, 2: 320}  # repeat r's best trial reached the target after so many fresh examples
    summary = {"repeats": [{"best": None if best[r] is None else {"mlflow_run_id": trials[r],
                                                                  "fresh_examples_to_target": best[r]}}
                           for r in range(3)]}
    assert register_search_model(sqlite_uri, summary, None) is None
    assert register_search_model(sqlite_uri, summary, "search-best") == "1"
    (version,) = MlflowClient(sqlite_uri).search_model_versions("name = 'search-best'")
    assert version.run_id == trials[2]

