"""The model a run logs (echoray/tracking_model.py): the weights rank 0 ended with
(recovery/checkpoint.py final_weights, handed over through the run's collector), in MLflow's
pt2 format, loadable with mlflow.pytorch.load_model and giving the trained network's
logits on what a reader yields; registered under tracking.register_model; a search
registers its best trial's."""

import mlflow.pytorch
import numpy as np
import torch
from mlflow.tracking import MlflowClient

from echoray.config_load import load_config
from echoray.data.sources import index_source, open_reader
from echoray.recovery.checkpoint import final_weights
from echoray.tracking import RunLogger
from echoray.tracking_model import log_trained_model, save_to_run, served_model
from echoray.train.evaluate import Normalizer
from echoray.train.models import build_model
from echoray.tune.mlflow_runs import register_search_model


class _Wrapped(torch.nn.Module):
    """Stands for DistributedDataParallel: the net under `.module`."""

    def __init__(self, net):
        super().__init__()
        self.module = net


def _run(tmp_path, sqlite_uri, *overrides):
    cfg = load_config(None, [f"tracking.uri={sqlite_uri}", "model.name=small_cnn", *overrides])
    idx = index_source(cfg.source)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    logger = RunLogger(sqlite_uri, "models")
    logger.start("run", params={}, tags={})
    return cfg, idx, run_dir, logger


def test_final_weights_are_a_cpu_copy_of_the_unwrapped_net():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    weights = final_weights(_Wrapped(net))
    assert list(weights) == list(net.state_dict())  # the net's own keys, not "module.*"
    with torch.no_grad():
        net[0].weight.add_(1.0)  # training on after the hand-over does not reach the copy
    assert torch.equal(weights["0.weight"] + 1.0, net[0].weight.detach())
    assert all(t.device.type == "cpu" and not t.requires_grad for t in weights.values())


def test_the_weights_the_run_ended_with_are_logged_and_predict_as_trained(tmp_path, sqlite_uri):
    cfg, idx, run_dir, logger = _run(tmp_path, sqlite_uri, "tracking.register_model=digits-cnn")
    torch.manual_seed(7)
    net = build_model(cfg.model, idx.channels, idx.num_classes, idx.image_size).eval()
    uri = log_trained_model(cfg, idx, logger, run_dir, (final_weights(net), 2.9992))  # epochs: passes
    logger.end("FINISHED")
    model = mlflow.pytorch.load_model(uri)
    images, _ = open_reader(idx).read(idx.eval_ids[:7], "eval")
    normalize = Normalizer(cfg.preprocess.mean, cfg.preprocess.std, idx.channels, "cpu")
    with torch.no_grad():
        got = model(torch.from_numpy(images))
        want = net(normalize(torch.from_numpy(images)))  # the trained network, as evaluation runs it
    assert tuple(got.shape) == (7, 10)
    assert torch.allclose(got, want, atol=1e-5)
    client = MlflowClient(sqlite_uri)
    (logged,) = client.get_run(logger.run_id).outputs.model_outputs
    assert uri == f"models:/{logged.model_id}"
    made = client.get_logged_model(logged.model_id)
    assert made.tags["echoray.epoch"] == "2.9992"
    assert made.experiment_id == logger.experiment_id  # where the run page looks for it
    (version,) = client.search_model_versions("name = 'digits-cnn'")
    assert version.run_id == logger.run_id and str(version.version) == "1"


def test_no_final_weights_no_model(tmp_path, sqlite_uri, capsys):
    cfg, idx, run_dir, logger = _run(tmp_path, sqlite_uri)
    assert log_trained_model(cfg, idx, logger, run_dir, None) is None
    assert "no model logged" in capsys.readouterr().out
    assert not MlflowClient(sqlite_uri).get_run(logger.run_id).outputs.model_outputs


def test_search_registers_its_best_trial(tmp_path, sqlite_uri):
    cfg, idx, _, parent = _run(tmp_path, sqlite_uri)
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

