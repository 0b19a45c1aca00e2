"""MLflow bookkeeping for a search: its child runs, found by the parent's id and a trial key.

Every trial logs to its own child run (params are set once per run, so concurrent
trials never collide). A trial that Tune reruns after an interrupt first deletes
the earlier, partial attempt, so a resumed search holds one run per trial.
"""

from __future__ import annotations

from typing import Any


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def child_runs(uri: str, parent_run_id: str, trial_key: str | None = None) -> list[Any]:
    """Active (not deleted) child runs of a parent, optionally of one trial."""
    client = _client(uri)
    parent = client.get_run(parent_run_id)
    query = f"tags.mlflow.parentRunId = '{parent_run_id}'"
    if trial_key is not None:
        query += f" and tags.`echoray.trial_key` = '{trial_key}'"
    runs, token = [], None
    while True:
        page = client.search_runs([parent.info.experiment_id], filter_string=query,
                                  max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def finished_attempt(uri: str, parent_run_id: str, trial_key: str) -> dict[str, Any] | None:
    """The summary of an earlier attempt that finished (the trial ended while Tune was
    being interrupted, before Tune recorded it), so a resumed search does not retrain it."""
    import json

    from mlflow.artifacts import download_artifacts

    done = [r for r in child_runs(uri, parent_run_id, trial_key) if r.info.status == "FINISHED"]
    if not done:
        return None
    path = download_artifacts(run_id=done[0].info.run_id, artifact_path="summary.json", tracking_uri=uri)
    with open(path) as f:
        return json.load(f)


def discard_partial_attempts(uri: str, parent_run_id: str, trial_key: str) -> int:
    """Delete earlier attempts of this trial (a rerun after an interrupt starts over)."""
    client = _client(uri)
    old = child_runs(uri, parent_run_id, trial_key)
    for run in old:
        if run.info.status == "RUNNING":
            client.set_terminated(run.info.run_id, status="KILLED")
        client.delete_run(run.info.run_id)
    return len(old)


def mark_failed(uri: str, run_id: str) -> None:
    """A trial Tune recorded as errored has a FAILED run, whatever ended it first: a trial
    that errored as an interrupt came was stopped before it could end its run, and the
    interrupted search ended it KILLED (seen once in test_tune_search); Tune does not rerun
    an errored trial on resume, so its run would stay KILLED."""
    client = _client(uri)
    if client.get_run(run_id).info.status != "FAILED":
        client.set_terminated(run_id, status="FAILED")


def end_unfinished_children(uri: str, parent_run_id: str, status: str = "KILLED") -> int:
    """Trial actors stopped by Tune (interrupt, error) cannot end their runs; the driver does."""
    client = _client(uri)
    stale = [r for r in child_runs(uri, parent_run_id) if r.info.status == "RUNNING"]
    for run in stale:
        client.set_terminated(run.info.run_id, status=status)
    return len(stale)


def register_search_model(uri: str, summary: dict[str, Any], name: str | None) -> str | None:
    """tracking.register_model for a search: register the model its best trial logged (the
    repeats' bests, the fewest fresh examples to target first; none reached it: the first
    repeat's best). The version number, or None (no name, no best trial, or no model)."""
    from echoray.tracking_model import register_best_trial

    bests = [p["best"] for p in summary["repeats"] if p["best"] is not None]
    if not name or not bests:
        return None
    reached = [b for b in bests if b["fresh_examples_to_target"] is not None]
    best = min(reached, key=lambda b: b["fresh_examples_to_target"]) if reached else bests[0]
    return register_best_trial(uri, best["mlflow_run_id"], name)
