"""Where a search keeps its state (tune/search_storage.py): the home in train.storage_path,
what --resume reads from a local folder or from the home's URI (the tests' S3 server)."""

import json

import pytest

from echoray.config_load import ConfigError
from echoray.tune.search_storage import (
    claim_home,
    open_search,
    publish,
    search_home,
    tune_storage,
    upload_run,
)


def write_state(folder, **extra):
    folder.mkdir(parents=True, exist_ok=True)
    state = {"pipeline": "p.yaml", "config": {}, "trials": 2, "repeats": 1, "parent_run_id": "abc", **extra}
    (folder / "search.json").write_text(json.dumps(state))
    return state


def test_the_home_is_a_folder_per_search_inside_the_storage_path(tmp_path):
    d = tmp_path / "digits-search-20260101"
    assert search_home(None, d) is None
    assert search_home("s3://b/searches/", d) == "s3://b/searches/digits-search-20260101"
    assert tune_storage(None, d, retry_s=120) == (str(d.resolve()), None)


def test_resume_from_a_local_folder(tmp_path):
    state = write_state(tmp_path / "s", storage=None)
    assert open_search(str(tmp_path / "s"), tmp_path / "runs") == (tmp_path / "s", state)
    with pytest.raises(ConfigError, match=r"^--resume .*nowhere: no search.json there, so it is not a search folder"):
        open_search(str(tmp_path / "nowhere"), tmp_path / "runs")
    (tmp_path / "s" / "summary.json").write_text("{}")
    with pytest.raises(ConfigError, match="this search already finished"):
        open_search(str(tmp_path / "s"), tmp_path / "runs")


def test_a_search_with_a_home_resumes_from_the_state_there(tmp_path):
    home = tmp_path / "shared" / "s"
    there = write_state(home, storage=str(home), trials=3)
    write_state(tmp_path / "s", storage=str(home))  # the local copy, older
    assert open_search(str(tmp_path / "s"), tmp_path / "runs") == (tmp_path / "s", there)
    (home / "summary.json").write_text("{}")  # finished there, whichever folder is named
    with pytest.raises(ConfigError, match="this search already finished"):
        open_search(str(tmp_path / "s"), tmp_path / "runs")


def test_resume_from_the_uri_of_a_home_in_the_object_store(s3, tmp_path):
    home = s3.make_bucket("echoray-unit-searches") + "/searches/s"
    local = tmp_path / "s"
    state = write_state(local, storage=home)
    claim_home(home)  # empty: a new search may start there
    publish(home, 0, local / "search.json")
    with pytest.raises(ConfigError, match=r"^train.storage_path: s3://echoray-unit-searches/searches/s already holds"):
        tune_storage(home, local, 120, new=True)
    path, fs = tune_storage(home, local, 120)  # Tune's filesystem: the bucket's, every call retried
    assert path == "echoray-unit-searches/searches/s" and fs.type_name == "py::retrying+s3"
    assert fs.get_file_info(f"{path}/search.json").size == (local / "search.json").stat().st_size
    assert tune_storage(home, local, 0)[1].type_name == "s3"  # a retry time of 0: no retries
    run = tmp_path / "trials" / "r0-t0-x"
    run.mkdir(parents=True)
    (run / "summary.json").write_text("{}")
    upload_run(f"{home}/trials", run, retry_s=0)
    assert s3.keys(home) == ["search.json", "trials/r0-t0-x/summary.json"]

    runs = tmp_path / "elsewhere" / "runs"  # another machine: no local folder
    assert open_search(home, runs) == (runs / "s", state) and (runs / "s").is_dir()
    with pytest.raises(ConfigError, match=r"--resume s3://echoray-unit-searches/nothing: no search.json there"):
        open_search("s3://echoray-unit-searches/nothing", runs)
    with pytest.raises(ConfigError, match=r"^train.storage_path s3://no-such-bucket-x/s: the bucket"):
        open_search("s3://no-such-bucket-x/s", runs)
