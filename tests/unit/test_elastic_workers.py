"""scaling.num_workers as [min, max]: an elastic Ray Train worker group (config.py
ScalingConfig, _check_worker_groups). What cannot follow a count that changes mid-run is
refused naming the key; everything planned ahead plans for max; a machine that cannot hold
even min is bad input (preflight.py require_plan_fits)."""

import pytest

from echoray.config_load import ConfigError, load_config, to_yaml
from echoray.preflight import require_plan_fits
from echoray.recovery.resume import open_run, write_run_state
from echoray.run import epoch_clock
from echoray.runtime.resources import elastic_group_size, plan_resources
from echoray.train.local_mode import fits_local_mode

CKPT = "train.checkpoint_every=1"


def test_a_pair_is_an_elastic_group_and_a_number_or_an_equal_pair_is_not():
    s = load_config(None, ["scaling.num_workers=[1, 3]", CKPT]).scaling
    assert (s.num_workers, s.min_workers, s.max_workers, s.elastic) == ((1, 3), 1, 3, True)
    assert s.ray_num_workers() == (1, 3)  # what Ray Train's ScalingConfig is given
    fixed = load_config(None, ["scaling.num_workers=[2, 2]"]).scaling
    assert (fixed.elastic, fixed.ray_num_workers(), fixed.min_workers) == (False, 2, 2)
    assert load_config(None, ["scaling.num_workers=2"]).scaling.ray_num_workers() == 2


def test_the_pair_survives_config_yaml(tmp_path):
    cfg = load_config(None, ["scaling.num_workers=[1, 2]", CKPT])
    (tmp_path / "c.yaml").write_text(to_yaml(cfg))
    assert load_config(tmp_path / "c.yaml").scaling.num_workers == (1, 2)
    assert cfg.model_dump(mode="json")["scaling"]["num_workers"] == [1, 2]  # as the workers receive it


@pytest.mark.parametrize(("sets", "message"), [
    (["scaling.num_workers=[2, 1]"], "--set scaling.num_workers: [min, max] needs 1 <= min <= max, got [2, 1]"),
    (["scaling.num_workers=[0, 2]"], "--set scaling.num_workers: [min, max] needs 1 <= min <= max, got [0, 2]"),
    (["scaling.num_workers=[1, 2, 3]"], "--set scaling.num_workers: expected an integer >= 1 or a list of 2"),
    (["scaling.num_workers=[2, 4]", CKPT, "batch_augmentation.copies=2", "batch_augmentation.mode=grouped",
      "preprocess.augment.on=worker"],
     "scaling.num_workers [2, 4]: Ray Train restarts an elastic worker group with any count from min to max, "
     "and batch_augmentation.mode: grouped needs a multiple of batch_augmentation.copies (2)"),
    (["scaling.num_workers=[1, 2]", CKPT, "scaling.local_mode=true"],
     "scaling.num_workers [1, 2]: scaling.local_mode: true trains one worker in the driver's process"),
    (["scaling.num_workers=[1, 2]", "train.checkpoint_every=0"],
     "scaling.num_workers [1, 2]: an elastic worker group restarts from the last checkpoint"),
])
def test_what_cannot_follow_a_changing_count_is_refused_naming_the_key(sets, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, sets)
    assert message in str(err.value)


def test_grouped_copies_of_one_and_local_batch_augmentation_take_a_pair():
    for sets in (["batch_augmentation.mode=grouped", "batch_augmentation.copies=1"],
                 ["batch_augmentation.copies=2", "preprocess.augment.on=worker"]):
        assert load_config(None, ["scaling.num_workers=[1, 3]", CKPT, *sets]).scaling.elastic


def test_what_is_planned_ahead_plans_for_max():
    cfg = load_config(None, ["scaling.num_workers=[1, 3]", CKPT, "train.batch_size=32"])
    plan = plan_resources(cfg, use_gpu=False)
    assert (plan.num_workers, plan.min_workers) == (3, 1)
    assert plan.demand() == {"CPU": 3 * 1.0 + 0.5}  # default: 1 CPU a worker, one actor of 0.5
    assert plan.least().demand() == {"CPU": 1.5}  # what progress needs (the stall message's shortfall)
    assert "1 to 3 train worker(s)" in plan.describe()
    assert epoch_clock(cfg, 640).last_batch == 3 * 32  # the largest group's last partial batch
    assert not fits_local_mode(cfg, use_gpu=False)
    assert fits_local_mode(load_config(None, ["scaling.num_workers=[1, 1]"]), use_gpu=False)


def test_ray_train_starts_an_elastic_group_with_what_the_total_resources_hold():
    plan = plan_resources(load_config(None, ["scaling.num_workers=[1, 4]", CKPT, "scaling.cpus_per_worker=0.5",
                                             "scaling.resources_per_worker={slot: 1}"]), use_gpu=False)
    assert elastic_group_size(plan, {"CPU": 8, "slot": 2}) == 2  # the scarcest resource decides
    assert elastic_group_size(plan, {"CPU": 1.2, "slot": 9}) == 2
    assert elastic_group_size(plan, {"CPU": 64, "slot": 64}) == 4  # capped at max
    assert elastic_group_size(plan, {"CPU": 8}) == 0


def test_a_machine_that_holds_fewer_than_min_is_bad_input():
    def plan(pair, cpus=1.0):
        return plan_resources(load_config(None, [f"scaling.num_workers={pair}", CKPT,
                                                 f"scaling.cpus_per_worker={cpus}"]), use_gpu=False)

    require_plan_fits(plan("[1, 4]", 0.5), {"CPU": 2.5})  # 4 x 0.5 by the totals, plus the 0.5 actor
    with pytest.raises(ConfigError, match=r"scaling.num_workers \[3, 4\]: this machine holds 2 train worker\(s\) "
                                          r"x \{'CPU': 1.0\}, fewer than the min 3"):
        require_plan_fits(plan("[3, 4]"), {"CPU": 2.0})
    # Ray Train sizes the group by the totals (2 workers here), not beside the actors: 2 + 0.5 > 2
    with pytest.raises(ConfigError, match=r"the pipeline needs more than this machine has \(CPU: needs 2.5, "
                                          r"cluster has 2\).*as many workers as the machine's resources hold in "
                                          r"all: 2 here"):
        require_plan_fits(plan("[1, 4]"), {"CPU": 2.0})
    require_plan_fits(plan("[1, 4]"), {"CPU": 3.5})  # 3 workers by the totals, beside the actor


def test_a_resume_may_make_a_fixed_run_elastic(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "config.yaml").write_text(to_yaml(load_config(None, ["scaling.num_workers=2", CKPT])))
    write_run_state(d, mlflow_run_id="r1", tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", pipeline="p",
                    started_at=0.0, storage=str(d / "ray"))
    cfg, resume = open_run(str(d), ["scaling.num_workers=[1, 2]"])
    assert cfg.scaling.num_workers == (1, 2) and list(resume.changed) == ["scaling.num_workers"]
