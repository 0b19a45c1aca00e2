"""Placement requests are kept where the cluster has or can add the resource, and dropped
(with a note) where nothing ever will: one machine or a fixed cluster."""

import json

from echoray.config_load import load_config
from echoray.runtime.autoscaler import v1_status_can_add_nodes
from echoray.runtime.placement import fit_to_cluster

CLUSTER = ["preprocess.actors.resources={cpu_node: 0.001}", "scaling.resources_per_worker={gpu_node: 0.001}",
           "scaling.use_gpu=true"]
LAPTOP = {"CPU": 2.0, "memory": 8e9, "object_store_memory": 2e9, "node:__internal_head__": 1.0}


def test_one_machine_drops_every_node_type_request_and_says_so():
    cfg = load_config(None, CLUSTER)
    fitted, notes = fit_to_cluster(cfg, LAPTOP, can_add_nodes=False)
    assert fitted.preprocess.actors.resources == {} and fitted.scaling.resources_per_worker == {}
    assert fitted.scaling.use_gpu is False
    assert notes == [
        "placement: no node has cpu_node and no autoscaler can add one; preprocessing actors run on any node",
        "placement: no node has gpu_node and no autoscaler can add one; train workers run on any node",
        "placement: no node has a GPU and no autoscaler can add one; training on CPU",
    ]
    assert cfg.preprocess.actors.resources == {"cpu_node": 0.001}  # the caller's config is untouched


def test_an_autoscaler_keeps_every_request_even_with_no_worker_nodes_yet():
    cfg = load_config(None, CLUSTER)
    fitted, notes = fit_to_cluster(cfg, {"memory": 8e9}, can_add_nodes=True)
    assert fitted == cfg and notes == []


def test_a_fixed_cluster_keeps_what_some_node_has_and_drops_only_the_rest():
    cfg = load_config(None, [*CLUSTER[:2], "preprocess.actors.resources={cpu_node: 0.001, ssd: 1}"])
    fitted, notes = fit_to_cluster(cfg, {**LAPTOP, "cpu_node": 1.0, "gpu_node": 1.0, "GPU": 1.0},
                                   can_add_nodes=False)
    assert fitted.preprocess.actors.resources == {"cpu_node": 0.001}
    assert fitted.scaling.resources_per_worker == {"gpu_node": 0.001}
    assert fitted.scaling.use_gpu == "auto"
    assert notes == ["placement: no node has ssd and no autoscaler can add one; preprocessing actors run on any node"]


def _v1_status(types: dict, pending: dict) -> str:
    return json.dumps({"autoscaler_report": {"node_type_mapping": types, "pending_launches": pending}})


def test_v1_status_tells_a_cluster_config_from_a_read_only_monitor():
    node = "a" * 56
    assert not v1_status_can_add_nodes(None)
    assert not v1_status_can_add_nodes(_v1_status({node: f"node_{node}"}, {}))  # plain `ray start --head`
    assert v1_status_can_add_nodes(_v1_status({node: "head"}, {}))
    assert v1_status_can_add_nodes(_v1_status({}, {"gpu_worker": 1}))
