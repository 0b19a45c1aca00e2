"""cluster.yaml passes the Ray autoscaler's own preparation and validation (what `ray up`
runs before it contacts the cloud), and its node types match the cluster pipeline."""

import copy

import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

from echoray.config_load import load_config


@pytest.fixture(scope="module")
def raw(repo) -> dict:
    return yaml.safe_load((repo / "cluster.yaml").read_text())


@pytest.fixture(scope="module")
def prepared(raw) -> dict:
    cfg = prepare_config(copy.deepcopy(raw))  # merges Ray's AWS defaults and setup commands
    validate_config(cfg)  # Ray's JSON schema plus its cross-field checks
    return cfg


def test_work_is_tagged_to_worker_types_that_scale_from_zero(prepared):
    types = prepared["available_node_types"]
    assert set(types) == {"head", "cpu_worker", "cpu_spot_worker", "gpu_worker"} and prepared["head_node_type"] == "head"
    assert types["head"]["resources"] == {"CPU": 2}  # small driver tasks only: it has no tag
    assert types["cpu_worker"]["resources"] == types["cpu_spot_worker"]["resources"] == {"cpu_node": 1}
    assert types["gpu_worker"]["resources"] == {"gpu_node": 1}
    for name in ("cpu_worker", "cpu_spot_worker", "gpu_worker"):
        assert types[name]["min_workers"] == 0 < types[name]["max_workers"] <= prepared["max_workers"]


def test_the_cluster_pipeline_asks_for_the_node_types_resources(repo, raw):
    cfg = load_config(repo / "pipelines" / "cluster_digits.yaml")
    offered = {name: set(t["resources"]) for name, t in raw["available_node_types"].items()}
    assert [n for n, res in offered.items() if set(cfg.preprocess.actors.resources) <= res] == [
        "cpu_worker", "cpu_spot_worker"]
    assert [n for n, res in offered.items() if set(cfg.scaling.resources_per_worker) <= res] == ["gpu_worker"]
    assert cfg.scaling.use_gpu is True


def test_only_ssh_is_open_and_token_authentication_stays_on(prepared):
    # Ray adds SSH from anywhere and intra-cluster traffic; extra IpPermissions would open more.
    assert prepared["provider"]["security_group"] == {"GroupName": "echoray-ssh-only"}
    head_start = " ".join(prepared["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head_start and "0.0.0.0" not in head_start
    assert "mlflow server --host $MLFLOW_HOST" in head_start  # the head's private IP
    for commands in (prepared["head_setup_commands"], prepared["worker_setup_commands"]):
        assert any("export RAY_AUTH_MODE=token" in c for c in commands)
        assert any("MLFLOW_TRACKING_URI=http://" in c for c in commands)
    assert prepared["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"


def test_setup_installs_the_project_on_every_node(prepared):
    assert prepared["file_mounts"]["~/echoray"] == "."
    for commands in (prepared["head_setup_commands"], prepared["worker_setup_commands"]):
        assert any('pip install --quiet "$HOME/echoray"' in c for c in commands)


def test_worker_nodes_reach_the_bucket_with_an_instance_profile(prepared):
    """Checkpoints and data are in S3 on a cluster: workers get a role, never copied keys."""
    types = prepared["available_node_types"]
    for name in ("cpu_worker", "cpu_spot_worker", "gpu_worker"):
        assert types[name]["node_config"]["IamInstanceProfile"] == {"Name": "echoray-s3"}
    assert not any("AWS_SECRET_ACCESS_KEY" in c for c in prepared["setup_commands"])


def test_spot_nodes_preprocess_only(prepared):
    """Spot instances (which the cloud may take back) only for preprocessing, whose loss
    costs time, not counts (tests/e2e/test_node_lost.py); training and the head on demand."""
    types = prepared["available_node_types"]
    spot = [n for n, t in types.items() if t["node_config"].get("InstanceMarketOptions", {}).get("MarketType") == "spot"]
    assert spot == ["cpu_spot_worker"]
