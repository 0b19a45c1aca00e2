import pytest

from echoray.config import PipelineConfig
from echoray.config_load import ConfigError, apply_override, flatten, load_config, parse_yaml


def test_digits_yaml_is_the_embedded_default(repo):
    assert load_config(repo / "pipelines" / "digits.yaml") == load_config(None) == PipelineConfig()


@pytest.mark.parametrize("name", ["digits", "cifar10_resnet32", "cifar10_resnet44_ba", "imagenet_resnet50",
                                  "cluster_digits", "digits_search", "lm_linux_doc", "lm_gpu",
                                  "fashion_mnist", "fashion_mnist_ba"])
def test_every_declared_pipeline_validates(repo, name):
    cfg = load_config(repo / "pipelines" / f"{name}.yaml")
    assert cfg.name == name


def test_all_pipeline_files_are_covered(repo):
    names = sorted(p.stem for p in (repo / "pipelines").glob("*.yaml"))
    assert names == ["cifar10_resnet32", "cifar10_resnet44_ba", "cluster_digits", "digits", "digits_search",
                     "fashion_mnist", "fashion_mnist_ba", "imagenet_resnet50", "lm_gpu", "lm_linux_doc"]


def test_overrides_parse_values_as_yaml():
    cfg = load_config(None, ["echo.factor=2.5", "echo.stage=batch", "audit.enabled=true",
                             "preprocess.actors.resources={cpu_node: 1}"])
    assert cfg.echo.factor == 2.5 and cfg.echo.stage == "batch" and cfg.audit.enabled is True
    assert cfg.preprocess.actors.resources == {"cpu_node": 1.0}


def test_yaml_on_stays_a_key_not_a_boolean():
    assert parse_yaml("on: worker\nyes: no\nflag: true") == {"on": "worker", "yes": "no", "flag": True}


@pytest.mark.parametrize("override, named", [
    ("train.bogus=1", "train.bogus: unknown key"),
    ("echo.stage=sideways", "echo.stage"),
    ("echo.factor=0.5", "echo.factor"),
    ("echo.factor=.nan", "echo.factor"),
    ("train.batch_size=0", "train.batch_size"),
    ("train.batch_size=many", "train.batch_size"),
    ("train.evals_per_epoch=0", "train.evals_per_epoch"),
    ("train.evals_per_epoch=2.5", "train.evals_per_epoch"),
    ("optimizer.momentum=1.5", "optimizer.momentum"),
    ("source.kind=cifar10", "source.path is required"),
    ("preprocess.augment.ops=[{op: cutout}]", "needs 'size'"),
])
def test_invalid_values_name_the_key(override, named):
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    assert named in str(err.value)


def test_grouped_batch_augmentation_needs_divisible_workers():
    with pytest.raises(ConfigError, match="scaling.num_workers must be a multiple of batch_augmentation.copies"):
        load_config(None, ["batch_augmentation.mode=grouped", "batch_augmentation.copies=3",
                           "scaling.num_workers=4", "preprocess.augment.on=worker"])


def test_batch_augmentation_views_need_worker_side_augmentation():
    with pytest.raises(ConfigError, match="set preprocess.augment.on: worker"):
        load_config(None, ["batch_augmentation.copies=2"])
    cfg = load_config(None, ["batch_augmentation.copies=2", "preprocess.augment.ops=[]", "model.dropout=0.3"])
    assert cfg.batch_augmentation.copies == 2  # intermediate BA: views differ through dropout


def test_malformed_override_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="--set takes key=value"):
        load_config(None, ["echo.factor"])
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("echo: [unclosed")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(bad)
    bad.write_text("- a list")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(bad)


def test_override_cannot_descend_into_a_value():
    tree = {"echo": {"factor": 2}}
    with pytest.raises(ConfigError, match="echo.factor is not a section"):
        apply_override(tree, "echo.factor.x=1")


def test_flatten_gives_dotted_params():
    flat = flatten(PipelineConfig())
    assert flat["echo.stage"] == "none" and flat["train.target"] == "0.97"
    assert flat["preprocess.augment.ops"].startswith("[{")


def test_removed_keys_are_refused_naming_what_replaces_them(monkeypatch):
    from echoray import config_load
    from echoray.config_load import ConfigError, load_config

    monkeypatch.setitem(config_load.REMOVED_KEYS, "train.old_key", "use train.batch_size")
    assert list(config_load.REMOVED_KEYS) == sorted(config_load.REMOVED_KEYS)
    for key, instead in config_load.REMOVED_KEYS.items():
        with pytest.raises(ConfigError) as err:
            load_config(None, [f"{key}=1"])
        assert f"{key}: this key was removed ({instead})" in str(err.value)
    with pytest.raises(ConfigError, match="train.old_key: this key was removed"):
        config_load.validate({"train": {"old_key": None}})
