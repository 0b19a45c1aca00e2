"""The extension points by import path (echoray/plugins.py): a model factory, a reader,
an augmentation op; each checked before start, each error naming its key."""

import re

import numpy as np
import pytest

from echoray.config import AUGMENT_OPS, MODEL_NAMES, SOURCE_KINDS, AugmentOp
from echoray.config_load import ConfigError, load_config, to_yaml, validate
from helpers import REPO


@pytest.fixture(autouse=True)
def _examples_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "examples"))


def cfg(*overrides):
    return load_config(None, list(overrides))


def refused(*overrides) -> str:
    with pytest.raises(ConfigError) as err:
        cfg(*overrides)
    return str(err.value)


# --- names ---

def test_built_in_names_stay_valid_and_others_are_refused_listing_them():
    for kind in SOURCE_KINDS[:1]:
        assert cfg(f"source.kind={kind}").source.kind == kind
    for name in (n for n in MODEL_NAMES if n != "transformer_lm"):  # an image model on digits
        assert cfg(f"model.name={name}").model.name == name
    assert "transformer_lm" in MODEL_NAMES and "text" in SOURCE_KINDS and "idx" in SOURCE_KINDS
    for op in AUGMENT_OPS:
        assert AugmentOp(op=op, size=4).op == op
    msg = refused("model.name=vgg")
    assert "model.name: expected one of 'small_cnn'" in msg and "'package.module:name'" in msg and "'vgg'" in msg
    assert "source.kind: expected one of 'digits'" in refused("source.kind=lmdb")
    assert "preprocess.augment.ops.0.op: expected one of 'random_crop'" in refused(
        'preprocess.augment.ops=[{"op": "blur"}]')


# --- model ---

def test_model_factory_is_called_with_classes_input_shape_and_kwargs():
    from echoray.train.models import build_model

    c = cfg("model.name=my_model:mlp", 'model.kwargs={"hidden": 24, "depth": 1}')
    net = build_model(c.model, 1, 10, 12)
    assert [tuple(p.shape) for p in net.parameters()][:2] == [(24, 144), (24,)]
    assert net(__import__("torch").zeros(5, 1, 12, 12)).shape == (5, 10)


@pytest.mark.parametrize("overrides, named", [
    (["model.name=no_such_module_xyz:f"], "model.name 'no_such_module_xyz:f': cannot import module 'no_such_module_xyz'"),
    (["model.name=my_model:nope"], "model.name 'my_model:nope': module 'my_model' has no attribute 'nope'"),
    (["model.name=plugin_fixtures:no_input_shape"], "model.name 'plugin_fixtures:no_input_shape': the model factory "
                                                   "cannot be called as (num_classes=..., input_shape=...)"),
    (["model.name=my_model:mlp", 'model.kwargs={"widht": 3}'], "unexpected keyword argument 'widht'"),
    (["model.name=plugin_fixtures:NOT_CALLABLE"], "the model factory must be callable, got int"),
    (['model.kwargs={"hidden": 3}'], "model.kwargs is for a model factory by import path"),
])
def test_model_errors_name_the_key_before_start(overrides, named):
    assert named in refused(*overrides)


def test_broken_module_reports_its_own_error(tmp_path, monkeypatch):
    (tmp_path / "broken_plugin_mod.py").write_text("raise RuntimeError('needs a GPU driver')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "cannot import module 'broken_plugin_mod' (RuntimeError: needs a GPU driver)" in refused(
        "model.name=broken_plugin_mod:f")


def test_factory_returning_no_module_fails_naming_the_key():
    from echoray.train.models import build_model

    c = cfg("model.name=plugin_fixtures:returns_int")
    with pytest.raises(TypeError, match="model.name 'plugin_fixtures:returns_int': the factory returned int"):
        build_model(c.model, 1, 10, 16)


def test_cli_exits_2_for_a_model_that_does_not_import(tmp_path):
    from test_cli_errors import echoray

    out = echoray("train", "--set", "model.name=no_such_module_xyz:f", cwd=tmp_path)
    assert out.returncode == 2 and "model.name 'no_such_module_xyz:f': cannot import" in out.stderr
    assert list(tmp_path.iterdir()) == []


# --- reader ---

def test_reader_by_import_path_is_indexed_and_read_like_a_built_in(tmp_path):
    from my_reader import write_digits

    from echoray.data.sources import index_source, open_reader

    folder = write_digits(tmp_path / "npy", side=12)
    c = cfg("source.kind=my_reader:NumpyReader", f"source.path={folder}", "source.limit=100")
    idx = index_source(c.source)
    assert (idx.kind, idx.num_classes, idx.image_size, idx.channels) == ("my_reader:NumpyReader", 10, 12, 1)
    assert len(idx.train_ids) == 100 and len(idx.eval_ids) == 359
    assert not set(idx.train_ids) & set(idx.eval_ids)
    images, labels = open_reader(idx).read(idx.train_ids[:7], "train")
    expect = np.load(folder / "images.npy")[idx.train_ids[:7]]
    assert images.dtype == np.uint8 and np.array_equal(images, expect)
    assert np.array_equal(labels, np.load(folder / "labels.npy")[idx.train_ids[:7]])


def test_reader_options_reach_index_and_read_output_is_checked():
    from echoray.data.sources import SourceError, index_source, open_reader

    idx = index_source(cfg("source.kind=plugin_fixtures:Constant", 'source.options={"n": 6}').source)
    assert idx.train_ids.tolist() == [0, 1, 2, 3] and idx.eval_ids.tolist() == [4, 5]
    images, labels = open_reader(idx).read(np.array([3, 1]), "train")
    assert images[:, 0, 0, 0].tolist() == [3, 1] and labels.tolist() == [0, 1]
    for bad, named in (("float", "read returned images float32"), ("labels", "outside [0, 3)")):
        idx = index_source(cfg("source.kind=plugin_fixtures:Constant", f'source.options={{"bad": "{bad}"}}').source)
        with pytest.raises(SourceError, match=re.escape(named)):
            open_reader(idx).read(np.array([0, 1]), "train")


@pytest.mark.parametrize("overrides, named", [
    (["source.kind=plugin_fixtures:NoRead"], "the reader class has no method 'read'"),
    (["source.kind=plugin_fixtures:IndexTakesNothing"], "Reader.index cannot be called"),
    (["source.kind=plugin_fixtures:linear"], "a reader must be a class, got function"),
    (['source.options={"n": 3}'], "source.options is for a reader by import path"),
])
def test_reader_errors_name_the_key_before_start(overrides, named):
    assert named in refused(*overrides)


def test_reader_index_must_return_a_source_index():
    from echoray.data.sources import SourceError, index_source

    with pytest.raises(SourceError, match="index\\(cfg\\) returned dict, not a SourceIndex"):
        index_source(cfg("source.kind=plugin_fixtures:ReturnsDict").source)


# --- augmentation ops ---

def op_cfg(*ops: str):
    return cfg(f"preprocess.augment.ops=[{', '.join(ops)}]").preprocess.augment.ops


def test_op_keys_sit_beside_op_are_validated_by_its_params_and_written_back_flat():
    ops = op_cfg('{"op": "my_ops:Posterize", "bits": 3}', '{"op": "flip"}')
    assert ops[0].params == {"bits": 3, "p": 0.5}  # the op's defaults filled in
    dumped = ops[0].model_dump(mode="json")
    assert dumped == {"op": "my_ops:Posterize", "bits": 3, "p": 0.5}
    assert "params" not in ops[1].model_dump()
    c = cfg('preprocess.augment.ops=[{"op": "my_ops:Posterize", "bits": 3}]')
    again = validate(__import__("yaml").safe_load(to_yaml(c)))
    assert again == c


@pytest.mark.parametrize("op, named", [
    ('{"op": "my_ops:Posterize", "bits": 9}', "op 'my_ops:Posterize': bits: Input should be less than or equal to 8"),
    ('{"op": "my_ops:Posterize", "bitz": 2}', "bitz: Extra inputs are not permitted"),
    ('{"op": "plugin_fixtures:Shift", "amont": 2}', "unexpected keyword argument 'amont'"),
    ('{"op": "plugin_fixtures:NoParams", "p": 0.1}', "the op declares no Params, so it takes no keys (got p)"),
    ('{"op": "plugin_fixtures:NoCall"}', "the op class defines no __call__(images, keys)"),
])
def test_op_errors_name_the_key_before_start(op, named):
    msg = refused(f"preprocess.augment.ops=[{op}]")
    assert "preprocess.augment.ops.0" in msg and named in msg


def test_op_runs_with_its_own_key_stream_on_numpy_and_torch_alike():
    import torch

    from echoray.data import augment_np
    from echoray.data.augment import augment_batch as torch_augment
    from echoray.seeds import mix, uniform

    ops = op_cfg('{"op": "flip", "p": 0.5}', '{"op": "plugin_fixtures:KeyedInvert"}',
                 '{"op": "my_ops:Posterize", "bits": 2, "p": 1.0}')
    assert augment_np.handles(ops)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (64, 6, 6, 1), dtype=np.uint8)
    keys = mix(7, np.arange(64))
    out = augment_np.augment_batch(images, keys, ops)
    flipped = np.where((uniform(mix(keys, 0), 0).astype(np.float32) < np.float32(0.5))[:, None, None, None],
                       images[:, :, ::-1], images)
    inverted = np.where((uniform(mix(keys, 1), 0) < 0.5)[:, None, None, None], 255 - flipped, flipped)
    assert np.array_equal(out, inverted & np.uint8(0xC0))
    assert 0 < (uniform(mix(keys, 1), 0) < 0.5).sum() < 64  # the invert's own stream, not the flip's
    assert np.array_equal(torch_augment(torch.from_numpy(images), keys, ops).numpy(), out)


def test_op_output_shape_sets_the_model_input_and_is_enforced():
    from echoray.data import augment_np
    from echoray.data.op_shapes import output_size

    ops = op_cfg('{"op": "my_ops:CenterCrop", "size": 10}', '{"op": "random_crop", "padding": 1}')
    assert output_size(16, ops) == 10
    out = augment_np.augment_batch(np.zeros((3, 16, 16, 1), np.uint8), np.arange(3), ops)
    assert out.shape == (3, 10, 10, 1)
    with pytest.raises(ValueError, match="CenterCrop size 10 exceeds the 8 x 8 image"):
        output_size(8, ops)
    liar = op_cfg('{"op": "plugin_fixtures:LiesAboutShape"}')
    with pytest.raises(ValueError, match=r"returned shape \(2, 3, 3, 1\) for input \(2, 4, 4, 1\), but its "
                                         r"output_shape declares \(2, 4, 4, 1\)"):
        augment_np.augment_batch(np.zeros((2, 4, 4, 1), np.uint8), np.arange(2), liar)


def test_dataclass_params_and_public_augment():
    from echoray.data import augment_images

    out = augment_images(np.full((2, 2, 2, 1), 250, np.uint8), np.arange(2), [{"op": "plugin_fixtures:Shift", "amount": 9}])
    assert out.dtype == np.uint8 and out.max() == 255 and out.min() == 255


# --- a ray.data.Dataset as the source (echoray.train(dataset=...)) ---

class FakeDataset:
    """What the registration uses of a ray.data.Dataset: select_columns and iter_batches."""

    def __init__(self, columns):
        self.columns = columns

    def select_columns(self, names):
        return FakeDataset({k: v for k, v in self.columns.items() if k in names})

    def iter_batches(self, batch_format, batch_size):
        n = len(next(iter(self.columns.values())))
        for s in range(0, n, batch_size):
            yield {k: v[s:s + batch_size] for k, v in self.columns.items()}


def test_dataset_source_uses_the_id_column_and_reads_by_id():
    from echoray.data.sources import index_source, open_reader
    from echoray.data.sources.dataset import READER, register

    images = np.arange(10 * 16 * 16, dtype=np.int64).reshape(10, 16, 16).astype(np.uint8)
    ds = FakeDataset({"img": images, "y": np.arange(10) % 4, "key": 100 - 7 * np.arange(10), "other": np.zeros(10)})
    token = register(ds, image_column="img", label_column="y", id_column="key")
    c = cfg(f"source.kind={READER}", f'source.options={{"dataset": "{token}"}}', "source.holdout_fraction=0.3")
    idx = index_source(c.source)
    assert (idx.num_classes, idx.image_size, idx.channels) == (4, 16, 1)
    assert len(idx.train_ids) == 7 and len(idx.eval_ids) == 3
    assert set(idx.train_ids) | set(idx.eval_ids) == set((100 - 7 * np.arange(10)).tolist())
    got, labels = open_reader(idx).read(np.array([93, 37]), "train")  # rows 1 and 9
    assert np.array_equal(got[..., 0], images[[1, 9]]) and labels.tolist() == [1, 1]


@pytest.mark.parametrize("columns, kwargs, named", [
    ({"image": np.zeros((3, 4, 4), np.float32), "label": np.zeros(3, int)}, {}, "want uint8 square images"),
    ({"image": np.zeros((3, 4, 4), np.uint8), "label": np.zeros(3, int)}, {"label_column": "cls"},
     "no label column 'cls'"),
    ({"image": np.zeros((3, 4, 4), np.uint8), "label": np.zeros(3, int), "k": np.array([1, 1, 2])},
     {"id_column": "k"}, "sample ids must be distinct non-negative integers"),
])
def test_dataset_source_errors_name_the_column(columns, kwargs, named):
    from echoray.data.sources import SourceError
    from echoray.data.sources.dataset import register

    with pytest.raises(SourceError, match=named):
        register(FakeDataset(columns), **kwargs)


def test_dataset_source_cannot_be_resumed_from_another_process():
    from echoray.data.sources import SourceError, index_source
    from echoray.data.sources.dataset import READER

    with pytest.raises(SourceError, match="source.options.dataset: no Dataset registered in this process"):
        index_source(cfg(f"source.kind={READER}", 'source.options={"dataset": "gone"}').source)
