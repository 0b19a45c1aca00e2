"""Config errors in the user's words (config_words.py): each names the `--set` or file it
came from, the closest valid keys of a typo, and what a key accepts; none shows pydantic's
loc tags, type names or an object's repr; the CLI exits 2 before anything starts."""

import re

import pytest

from echoray.cli import main
from echoray.config import PipelineConfig
from echoray.config_load import ConfigError, load_config
from echoray.config_words import forms, leaf_keys
from echoray.data.decode import BadImage, decode_full, decode_one

INTERNALS = re.compile(r"Input should|literal\[|\.float:|\.bool:|\.int:| object at 0x|EchoConfig|FieldInfo")


def cli_error(capsys, *argv: str) -> str:
    assert main(["train", *argv]) == 2
    err = capsys.readouterr().err
    assert not INTERNALS.search(err), err
    return err


@pytest.mark.parametrize("argv, message", [
    (["--set", "echo.factr=2"],
     "echoray: --set echo.factr: unknown key; did you mean echo.factor?\n"),
    (["--set", "factor=2"], "echoray: --set factor: unknown key; did you mean echo.factor?\n"),
    (["--set", "eco.factor=2"],
     "echoray: --set eco.factor: eco: unknown key; did you mean echo.factor?\n"),
    (["--set", "train.echo_factor=2"],
     "echoray: --set train.echo_factor: unknown key; did you mean echo.factor?\n"),
    (["--set", "batchsize=3"],
     "echoray: --set batchsize: unknown key; did you mean preprocess.batch_size or "
     "train.batch_size?\n"),
    (["--set", "train.bogus=1"], "echoray: --set train.bogus: unknown key\n"),
])
def test_unknown_key_names_its_set_and_the_closest_keys(capsys, argv, message):
    assert cli_error(capsys, *argv) == message


def test_unknown_key_in_a_file_names_the_file(capsys, tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("echo:\n  factr: 2\n")
    assert cli_error(capsys, str(f)) == f"echoray: {f}: echo.factr: unknown key; did you mean echo.factor?\n"


def test_a_list_item_typo_is_matched_within_its_section():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["preprocess.augment.ops=[{op: flip, paddin: 2}]"])
    assert str(err.value) == ("--set preprocess.augment.ops: preprocess.augment.ops.0"
                              ".paddin: unknown key; did you mean preprocess.augment.ops.0.padding?")


def test_a_missing_space_after_a_yaml_colon_is_said():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["preprocess.augment.ops=[{op: flip, p:1}]"])
    assert str(err.value).endswith("preprocess.augment.ops.0.p:1: unknown key; "
                                   "YAML needs a space after the colon (`p: 1`, not `p:1`)")


@pytest.mark.parametrize("assignment, problem", [
    ("echo.factor=two", "echo.factor: expected a number >= 1 or auto, got 'two'"),
    ("echo.factor=0.5", "echo.factor: expected a number >= 1 or auto, got 0.5"),
    ("echo.factor=.nan", "echo.factor: expected a number >= 1 or auto, got nan"),
    ("train.batch_size=0", "train.batch_size: expected an integer >= 1, got 0"),  # greater_than_equal
    ("train.batch_size=many", "train.batch_size: expected an integer >= 1, got 'many'"),  # int_parsing
    ("train.max_epochs=1.5", "train.max_epochs: expected an integer >= 1, got 1.5"),
    ("optimizer.lr=fast", "optimizer.lr: expected a number > 0, got 'fast'"),  # float_parsing
    ("optimizer.momentum=1.5", "optimizer.momentum: expected a number >= 0 and < 1, got 1.5"),
    ("model.dropout=2", "model.dropout: expected a number from 0 to 1, got 2"),
    ("train.compile=perhaps", "train.compile: expected true or false, got 'perhaps'"),  # bool_parsing
    ("scaling.use_gpu=maybe", "scaling.use_gpu: expected true, false or auto, got 'maybe'"),  # union
    ("echo.stage=sideways",  # literal_error
     "echo.stage: expected none, before_augment, after_augment or batch, got 'sideways'"),
    ("source.image_size=-1", "source.image_size: expected an integer >= 1 or null, got -1"),
    ("echo=3", "echo: expected a mapping of keys to values, got 3"),
    ("search.space={optimizer.lr: {low: x, high: 1}}",
     "search.space: search.space.optimizer.lr.low: expected a number or null, got 'x'"),
])
def test_a_bad_value_says_what_the_key_accepts(capsys, assignment, problem):
    assert cli_error(capsys, "--set", assignment) == f"echoray: --set {problem}\n"


def test_a_missing_key_is_required(capsys):
    assert cli_error(capsys, "--set", "preprocess.augment.ops=[{size: 3}]") == (
        "echoray: --set preprocess.augment.ops: preprocess.augment.ops.0.op: required\n")


def test_a_check_across_sections_names_the_set_it_mentions(capsys):
    err = cli_error(capsys, "--set", "model.dropout=0.1", "--set", "batch_augmentation.copies=2")
    assert err.startswith("echoray: --set batch_augmentation.copies: batch_augmentation.copies > 1")
    assert "embedded default" not in err


def test_several_problems_are_one_line_each(capsys):
    err = cli_error(capsys, "--set", "echo.factor=x", "--set", "train.bogus=2")
    assert err == ("echoray: invalid settings:\n"
                   "  --set echo.factor: expected a number >= 1 or auto, got 'x'\n"
                   "  --set train.bogus: unknown key\n")


def test_set_without_equals_is_refused_as_such(capsys, tmp_path):
    assert cli_error(capsys, "--set", "echo.factor", "2") == (
        "echoray: --set takes key=value; got 'echo.factor' followed by '2'\n")
    assert cli_error(capsys, "--set", "echo.factor") == "echoray: --set takes key=value; got 'echo.factor'\n"
    with pytest.raises(ConfigError, match=r"^--set takes key=value; got 'echo.factor'$"):
        load_config(tmp_path / "not-read.yaml", ["echo.factor"])  # refused before the file is read


def test_accepted_forms_come_from_the_field_types():
    assert forms(PipelineConfig.model_fields["seed"].annotation, PipelineConfig.model_fields["seed"].metadata) \
        == ["an integer >= 0"]
    keys = leaf_keys(PipelineConfig)
    assert "echo.factor" in keys and "preprocess.augment.ops" in keys and "source.tokenizer.kind" in keys
    assert "echo" not in keys and "source.tokenizer" not in keys  # sections are not leaves


@pytest.mark.parametrize("data, reason", [
    (b"", "empty file, 0 bytes"),
    (b"not an image", "not a readable image, 12 bytes"),
    (None, "no image bytes, a null cell"),
])
def test_an_undecodable_image_is_named_with_its_reason_only(data, reason):
    for decode in (lambda: decode_one(data, 16, 3, "cats/x.jpg"), lambda: decode_full(data, 3, "cats/x.jpg")):
        with pytest.raises(BadImage) as err:
            decode()
        assert str(err.value) == f"cannot decode image cats/x.jpg: {reason}"


def test_a_removed_key_names_its_set_and_what_replaces_it(capsys):
    err = cli_error(capsys, "--set", "scaling.in_process=true")
    assert err == ("echoray: --set scaling.in_process: this key was removed (renamed scaling.local_mode: "
                   "Ray Train's local mode, the same values)\n")
