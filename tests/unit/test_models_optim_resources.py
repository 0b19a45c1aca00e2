import pytest
import torch

from echoray.config import ModelConfig, PipelineConfig, ScheduleConfig
from echoray.config_load import load_config
from echoray.runtime.resources import plan_resources, shortfall
from echoray.train.models import build_model
from echoray.train.optim import lr_multiplier


@pytest.mark.parametrize("name, params", [("resnet20", 0.27e6), ("resnet32", 0.46e6),
                                          ("resnet44", 0.66e6), ("resnet56", 0.85e6)])
def test_cifar_resnets_match_the_paper_sizes(name, params):
    model = build_model(ModelConfig(name=name), 3, 10)
    n = sum(p.numel() for p in model.parameters())
    assert abs(n - params) / params < 0.03  # He et al. 2016, Table 6
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


def test_small_cnn_and_resnet50_shapes():
    assert build_model(ModelConfig(), 1, 10)(torch.zeros(4, 1, 16, 16)).shape == (4, 10)
    r50 = build_model(ModelConfig(name="resnet50"), 3, 7)
    assert r50(torch.zeros(1, 3, 64, 64)).shape == (1, 7)
    assert abs(sum(p.numel() for p in r50.parameters()) - 23.5e6) < 0.2e6


def test_schedules():
    cos = ScheduleConfig(name="cosine", warmup_epochs=1)
    assert lr_multiplier(0.5, 10, cos) == pytest.approx(0.5)
    assert lr_multiplier(1.0, 10, cos) == pytest.approx(1.0)
    assert lr_multiplier(5.5, 10, cos) == pytest.approx(0.5)
    assert lr_multiplier(10, 10, cos) == pytest.approx(0.0)
    step = ScheduleConfig(name="step", warmup_epochs=0, milestones=[3, 6], gamma=0.1)
    assert [lr_multiplier(e, 10, step) for e in (0, 2.9, 3, 6.5)] == pytest.approx([1, 1, 0.1, 0.01])
    assert lr_multiplier(4, 10, ScheduleConfig(name="constant", warmup_epochs=0)) == 1.0


def test_default_plan_fits_two_cpus_and_names_shortfalls():
    plan = plan_resources(PipelineConfig(), use_gpu=False)
    assert plan.demand() == {"CPU": 1.5}
    assert shortfall(plan.demand(), {"CPU": 2.0}) == {}
    big = plan_resources(load_config(None, ["scaling.num_workers=3"]), use_gpu=False)
    assert shortfall(big.demand(), {"CPU": 2.0}) == {"CPU": (3.5, 2.0)}
    tagged = plan_resources(load_config(None, ["preprocess.actors.resources={cpu_node: 1}",
                                               "preprocess.actors.min_size=2", "preprocess.actors.max_size=2"]),
                            use_gpu=True)
    assert tagged.demand() == {"CPU": 1 + 2 * 0.5, "GPU": 1.0, "cpu_node": 2.0}
    assert "cpu_node" in shortfall(tagged.demand(), {"CPU": 8, "GPU": 1})
