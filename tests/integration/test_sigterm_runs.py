"""SIGTERM at random moments of real `echoray` processes attached to the tests' Ray: a
run trained in process, a Ray Train run and a search. Each ends with exit 143 exactly
(never -6 or 1), prints the resume command, and leaves its MLflow run(s) KILLED; a run
keeps its checkpoint folder for --resume. The bulk of the 50+ signals go into real
training without Ray (tests/unit/test_stop_at_step.py); these are the real processes."""

import json
import random
import signal
import time

import pytest
import ray
from mlflow.tracking import MlflowClient
from test_driver_resume import Driver

TRAIN = ["--set", "train.target=null", "--set", "train.max_epochs=12", "--set", "train.checkpoint_every=1"]
KINDS = {
    "local_mode": ["train", "--set", "scaling.local_mode=true", *TRAIN],
    "ray_train": ["train", "--set", "scaling.local_mode=false", *TRAIN],
    "search": ["tune", "pipelines/digits_search.yaml", "--trials", "2", "--set", "train.target=null"],
}


# One process of each kind, the two moments shared out (seed 0: 1.69 s, seed 1: 0.27 s
# after training started). Both seeds for every kind made 6 processes of 15-28 s each,
# 2.8 min of the tier.
@pytest.mark.parametrize("kind, seed", [("local_mode", 0), ("ray_train", 1), ("search", 0)])
def test_sigterm_at_a_random_moment_exits_143_with_the_run_killed(local_ray, tmp_path, sqlite_uri, repo, kind,
                                                                   seed):
    db = sqlite_uri
    out = tmp_path / "out"
    d = Driver([*KINDS[kind], "--set", f"tracking.uri={db}", "--out", str(out)], repo)
    d.wait_for_line("epoch")  # training has started
    time.sleep(random.Random(seed).uniform(0.0, 2.0))  # a random moment inside training
    d.proc.send_signal(signal.SIGTERM)
    rc = d.finish(timeout_s=300)
    if rc == 0 and kind != "search":  # the run ended before the signal: nothing to check
        pytest.skip("the run finished before the signal")
    assert rc == 143, d.output[-4000:]
    assert "echoray: interrupted" in d.output
    resume = f"echoray tune --resume {out}" if kind == "search" else f"echoray train --resume {out}"
    assert resume in d.output, d.output[-4000:]
    client = MlflowClient(db)
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert runs and {r.info.status for r in runs} <= {"KILLED", "FINISHED"}, [r.info.status for r in runs]
    if kind != "search":
        state = json.loads((out / "run.json").read_text())
        assert client.get_run(state["mlflow_run_id"]).info.status == "KILLED"
        assert not (out / "summary.json").exists()
    assert ray.is_initialized()  # the tests' Ray outlived the driver
