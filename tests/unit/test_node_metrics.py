"""Which worker logs its node's system metrics (runtime/node_metrics.py): local rank 0 on each
node but the driver's, and only where the nodes reach the tracking store (an http(s) server)."""

from echoray.runtime.node_metrics import node_label, node_tracking

SERVER = "http://mlflow.internal:5000"


def test_local_rank_0_of_each_node_but_the_drivers_watches_it_under_its_node_rank():
    tracking = node_tracking(SERVER, "run1", driver_node="n-head")
    assert tracking == {"uri": SERVER, "run_id": "run1", "driver_node": "n-head"}
    # (local rank, node rank, node id) of a group of 4 workers, 2 per node, the head's node first
    group = [(0, 0, "n-head"), (1, 0, "n-head"), (0, 1, "n-gpu"), (1, 1, "n-gpu")]
    assert [node_label(tracking, *w) for w in group] == [None, None, "node_1", None]


def test_no_node_is_watched_where_the_store_is_the_drivers_file_or_system_metrics_are_off(monkeypatch):
    for uri in ("sqlite:////home/me/mlflow.db", "file:///home/me/mlruns", "/home/me/mlruns"):
        assert node_tracking(uri, "run1", "n-head") is None
    assert node_label(None, 0, 1, "n-gpu") is None
    monkeypatch.setenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "false")
    assert node_tracking(SERVER, "run1", "n-head") is None
    monkeypatch.setenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "true")
    assert node_tracking(SERVER, "run1", "n-head") is not None
