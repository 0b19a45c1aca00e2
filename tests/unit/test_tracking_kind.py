"""echoray's experiments open in MLflow's model-training view: the kind tag is set when
echoray creates one, and an existing experiment keeps its own tags."""

from mlflow.tracking import MlflowClient

from echoray.tracking import RunLogger


def test_new_experiment_gets_the_kind_existing_ones_keep_theirs(sqlite_uri):
    client = MlflowClient(sqlite_uri)
    old = client.create_experiment("old", tags={"team": "vision"})
    genai = client.create_experiment("genai", tags={"mlflow.experimentKind": "genai_development"})

    new = RunLogger(sqlite_uri, "echoray")
    assert client.get_experiment(new.experiment_id).tags == {"mlflow.experimentKind": "custom_model_development"}
    assert RunLogger(sqlite_uri, "echoray").experiment_id == new.experiment_id  # found, not created again
    assert RunLogger(sqlite_uri, "old").experiment_id == old
    assert client.get_experiment(old).tags == {"team": "vision"}
    RunLogger(sqlite_uri, "genai")
    assert client.get_experiment(genai).tags == {"mlflow.experimentKind": "genai_development"}
    # Created meanwhile by a concurrent trial: used. (One store per test: a sqlite store's
    # first open migrates its schema, seconds on this machine.)
    race = client.create_experiment("race")
    assert new._create("race") == race
