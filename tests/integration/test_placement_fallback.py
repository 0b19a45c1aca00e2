"""The cluster pipeline on one machine: no node has cpu_node, gpu_node or a GPU and no
autoscaler can add one, so the requests are dropped, the run says so, and it trains here."""

import yaml


def test_cluster_pipeline_falls_back_to_the_local_node(run_pipeline, repo, tmp_path, capsys):
    summary, _ = run_pipeline(repo / "pipelines" / "cluster_digits.yaml", "source.limit=256",
                              "train.max_epochs=1", "train.target=null")
    printed = capsys.readouterr().out
    assert "no node has cpu_node and no autoscaler can add one; preprocessing actors run on any node" in printed
    assert "no node has gpu_node and no autoscaler can add one; train workers run on any node" in printed
    assert "no node has a GPU and no autoscaler can add one; training on CPU" in printed
    assert summary["fresh_examples"] == (256 // 64) * 64 and summary["epochs"] == 1 and summary["evaluations"] == 1
    ran = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())  # the config that ran
    assert ran["preprocess"]["actors"]["resources"] == {} and ran["scaling"]["resources_per_worker"] == {}
    assert ran["scaling"]["use_gpu"] is False
