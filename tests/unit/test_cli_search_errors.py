"""`echoray tune | study | report` refuse bad input before anything starts: exit 2, the
problem named, nothing written (no folder, no mlflow.db, no Ray)."""

import pytest
from test_cli_errors import echoray

from helpers import REPO

SEARCH = str(REPO / "pipelines" / "digits_search.yaml")


@pytest.mark.parametrize("args, named", [
    (["tune"], "give a PIPELINE or --resume DIR"),
    (["tune", SEARCH, "--resume", "somewhere"], "give a PIPELINE or --resume DIR"),
    (["tune", "--resume", "somewhere", "--trials", "3"], "--resume continues a run as it was started"),
    (["tune", "--resume", "nowhere"], "--resume nowhere: no search.json there"),
    (["tune", SEARCH, "--trials", "0"], "expected a positive integer"),
    (["tune", str(REPO / "pipelines" / "digits.yaml")], "search.space is empty"),
    (["tune", SEARCH, "--set", "search.sequence=random"], "search.sequence"),
    (["study", SEARCH], "needs a PIPELINE and --out DIR"),
    (["study", SEARCH, "--out", "s", "--variants", "baseline,sideways:2"], "'sideways:2' is not a variant"),
    (["study", SEARCH, "--out", "s", "--variants", "ba:3", "--set", "scaling.num_workers=2",
      "--set", "batch_augmentation.mode=grouped"], "scaling.num_workers must be a multiple"),
    (["report", "nowhere"], "no study.json there"),
])
def test_search_commands_refuse_bad_input_naming_it(tmp_path, args, named):
    out = echoray(*args, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert named in out.stderr
    assert list(tmp_path.iterdir()) == []
