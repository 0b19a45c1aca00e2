"""One line per trial event on the driver (Tune's own table is turned off: verbose=0).

A trial's end line counts ended trials against the search's size, `[k/N ended]`, not
against the trials Tune has made so far: with search.max_concurrent 1 Tune asks the
searcher for the next point only once the running trial has ended, so the first trial
to end saw a list of one trial and printed `[1/1 ended]` in a search of two.
"""

from __future__ import annotations

from ray.tune import Callback


def _key(trial) -> str:
    c = trial.config
    return f"r{c['repeat']}-t{c['index']}"


def _params(trial) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in trial.config["params"].items())


class TrialLines(Callback):
    """`total`: the search's number of trials (trials x repeats). A search started before
    this attribute existed is restored from its pickled callback without it: then the
    trials Tune holds are counted, as before."""

    total: int | None = None

    def __init__(self, total: int | None = None):
        self.total = total

    def on_trial_start(self, iteration, trials, trial, **info):
        print(f"[echoray] trial {_key(trial)} started: {_params(trial)}", flush=True)

    def on_trial_complete(self, iteration, trials, trial, **info):
        m = trial.last_result or {}
        if m.get("target_reached"):
            what = f"reached the target after {m['fresh_examples_to_target']} fresh examples"
        else:
            best = m.get("best_metric", m.get("best_accuracy"))
            what = (f"did not reach the target (best {m.get('metric_name', 'accuracy')} "
                    f"{best if best is not None else float('nan'):.4f})")
        done = 1 + sum(t.status in ("TERMINATED", "ERROR") for t in trials if t is not trial)
        print(f"[echoray] trial {_key(trial)} {what}  [{done}/{self.total or len(trials)} ended]", flush=True)

    def on_trial_error(self, iteration, trials, trial, **info):
        print(f"[echoray] trial {_key(trial)} FAILED (see its log: {trial.path})", flush=True)
