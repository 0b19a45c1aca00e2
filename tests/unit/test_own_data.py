"""`echoray train --set source.path=FOLDER` (own_data.py): the run is named after the
folder, the source kind and the image size come from the data, the digits defaults it
keeps are named, and the examples a batch size leaves out of each epoch are counted."""

import argparse

import numpy as np
import pytest
from PIL import Image

from echoray.cli import _own_data_config, main
from echoray.config_load import ConfigError
from echoray.own_data import own_data


def image_folder(root, classes: int, per_class: int, sizes) -> str:
    rng = np.random.default_rng(0)
    for c in range(classes):
        (root / f"class{c}").mkdir(parents=True)
        for i in range(per_class):
            w, h = sizes[i % len(sizes)]
            Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(root / f"class{c}" / f"{i}.png")
    return str(root)


def config_and_console(capsys, overrides):
    args = argparse.Namespace(pipeline=None, overrides=overrides)
    cfg = _own_data_config(args)
    return cfg, args, capsys.readouterr().out.splitlines()


def test_a_folder_of_one_size_names_the_run_and_sizes_its_images(tmp_path, capsys):
    path = image_folder(tmp_path / "my flowers", 3, 30, [(24, 24)])
    cfg, args, lines = config_and_console(capsys, [f"source.path={path}"])
    assert (cfg.name, cfg.source.kind, cfg.source.image_size) == ("my_flowers", "image_folder", 24)
    assert args.label == f"embedded:digits defaults on {path}"
    assert lines == [
        f"[echoray] own data: source.kind image_folder: {path} holds class folders",
        "[echoray] own data: source.image_size 24: the images are 24x24; set source.image_size to choose",
        "[echoray] own data: defaults from the embedded digits pipeline (pipelines/digits.yaml): model.name "
        "small_cnn, optimizer.lr 0.05, train.batch_size 64, train.max_epochs 20, train.target 0.97; "
        "change any with --set KEY=VALUE",
        # 90 images, 18 held out (holdout_fraction 0.2): 72 to train, one batch of 64
        "[echoray] own data: train.batch_size 64 x 1 worker(s): 8 of the 72 training examples are left out "
        "of each epoch (the last, partial batch; the shuffle leaves out others each epoch); a batch size "
        "dividing 72 uses them all",
    ]


def test_mixed_sizes_take_the_median_shorter_side(tmp_path, capsys):
    path = image_folder(tmp_path / "mixed", 2, 9, [(40, 30), (50, 36), (20, 60)])
    cfg, _, lines = config_and_console(capsys, [f"source.path={path}", "train.batch_size=7"])
    assert cfg.source.image_size == 30
    assert ("[echoray] own data: source.image_size 30: 18 images read, 20x60 to 50x36: each is resized so its "
            "shorter side is 30 and centre-cropped; set source.image_size to choose") in lines
    assert not [line for line in lines if "left out" in line]  # 14 training examples, batch 7
    assert "train.batch_size" not in lines[-1]  # the user's own value is not a default taken


def test_the_users_own_settings_win_and_are_not_reported(tmp_path):
    path = image_folder(tmp_path / "d", 2, 4, [(16, 16)])
    fitted = own_data(None, [f"source.path={path}", "source.kind=image_folder", "source.image_size=8",
                             "name=mine", "model.name=resnet20", "optimizer.lr=0.1", "train.batch_size=4",
                             "train.max_epochs=3", "train.target=null"])
    assert fitted.overrides == [] and fitted.notes == []


def test_a_pipeline_file_or_no_path_keeps_the_pipeline_as_it_is(tmp_path):
    assert own_data("pipelines/digits.yaml", [f"source.path={tmp_path}"]).overrides == []
    assert own_data(None, ["echo.factor=2"]).overrides == []


def test_parquet_files_are_a_parquet_source(tmp_path):
    (tmp_path / "part-0.parquet").write_bytes(b"")
    assert own_data(None, [f"source.path={tmp_path}"]).overrides[:2] == ["source.kind=parquet", f"name={tmp_path.name}"]


def test_a_folder_of_neither_asks_for_source_kind(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match="neither class folders .* set source.kind"):
        own_data(None, [f"source.path={tmp_path}"])


def test_a_missing_folder_exits_2_naming_it(tmp_path, capsys):
    assert main(["train", "--set", f"source.path={tmp_path}/nope"]) == 2
    assert capsys.readouterr().err == f"echoray: --set source.path={tmp_path}/nope: no such file or folder\n"
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_of_a_given_kind_exits_2_naming_it(tmp_path, capsys):
    assert main(["train", "--set", "source.kind=image_folder", "--set", f"source.path={tmp_path}/nope"]) == 2
    assert capsys.readouterr().err == f"echoray: source.path {tmp_path}/nope: no such directory\n"
