"""The keys issue 59 removed (config_load.REMOVED_KEYS: the head start, read pacing) are
refused by name, with what replaces them, from a YAML file, from --set and from the CLI
(exit 2, nothing written); tests/unit/test_config.py checks the table's mechanism."""

import subprocess
import sys

import pytest

from echoray.config import PipelineConfig
from echoray.config_load import REMOVED_KEYS, ConfigError, load_config
from helpers import REPO

REMOVED = sorted(REMOVED_KEYS)
ISSUE_59 = ("preprocess.head_start_pool_at", "preprocess.head_start_rows", "source.max_rows_ahead")
# Knobs a user does not set for their own run, now constants or derived (issue 59, deliverable 6).
TUNING = ("echo.fill_waits", "echo.separate_copies", "echo.start_factor", "preprocess.deterministic",
          "search.sequence", "search.warm_trials", "source.range_bytes", "source.read_concurrency",
          "source.tokenizer.train_bytes", "storage.retry_s", "train.checkpoint_min_interval_s",
          "train.checkpoints_to_keep")
OP_KEYS = ("preprocess.augment.ops.params", "preprocess.augment.ops.ratio", "preprocess.augment.ops.scale")


def test_no_removed_key_is_a_field_of_the_config():
    """The table names only keys the model no longer has (one of them back would be shadowed)."""
    for key in REMOVED:
        node = PipelineConfig.model_fields
        *path, leaf = key.split(".")
        for part in path:  # a section that is gone holds no field
            node = getattr(node[part].annotation, "model_fields", {}) if part in node else {}
        assert leaf not in node, key
    assert REMOVED == list(REMOVED_KEYS)  # one row per key, sorted


@pytest.mark.parametrize("key", ISSUE_59 + TUNING)
def test_each_removed_key_is_refused_from_set_naming_what_replaces_it(key):
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"{key}=1"])
    assert f"{key}: this key was removed ({REMOVED_KEYS[key]})" in str(err.value)
    assert "unknown key" not in str(err.value)


def test_removed_keys_in_a_yaml_file_are_refused_all_at_once(tmp_path):
    p = tmp_path / "old.yaml"
    p.write_text("source:\n  max_rows_ahead: 512\npreprocess:\n  head_start_rows: 64\n  head_start_pool_at: 32\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    for key in ISSUE_59:  # each named with the file that sets it
        assert f"{p}: {key}: this key was removed ({REMOVED_KEYS[key]})" in msg


def test_the_cli_exits_2_naming_the_removed_key_and_writes_nothing(tmp_path):
    code = f"import sys; sys.path.insert(0, {str(REPO / 'platform')!r}); from echoray.cli import main; sys.exit(main())"
    out = subprocess.run([sys.executable, "-c", code, "train", "--set", "preprocess.head_start_rows=64"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "preprocess.head_start_rows: this key was removed (the head start is gone" in out.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("key", OP_KEYS)
def test_a_removed_key_of_a_list_item_is_refused_in_any_item(key):
    """preprocess.augment.ops is a list: a removed op key is found in whichever op sets it."""
    leaf = key.rsplit(".", 1)[1]
    ops = f"preprocess.augment.ops=[{{op: flip}}, {{op: random_resized_crop, size: 8, {leaf}: [1, 2]}}]"
    with pytest.raises(ConfigError) as err:
        load_config(None, [ops, "preprocess.augment.on=worker"])
    assert f"{key}: this key was removed ({REMOVED_KEYS[key]})" in str(err.value)
    assert load_config(None, ["preprocess.augment.ops=[{op: random_resized_crop, size: 8}]"])  # without it: valid
