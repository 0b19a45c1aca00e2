"""One line per trial event on the driver (Tune's own output is off: search_run.py _tune_env).

A trial's end line counts ended trials against the search's size, `[k/N ended]`, not
against the trials Tune has made so far: with search.max_concurrent 1 Tune asks the
searcher for the next point only once the running trial has ended, so the first trial
to end saw a list of one trial and printed `[1/1 ended]` in a search of two.

On a terminal (stdout a TTY) `search_bar` adds a bar at the foot of the console, the
trials ended out of the search's size with the time left at the rate so far (tqdm), and
every line printed meanwhile (these, and what Ray forwards from the trials) goes above it.
Elsewhere (a pipe, a log file, `ray job submit`) the lines are all there is.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ray.tune import Callback

_bar: Any = None  # the search's bar while search_bar shows one (the callback is pickled: not on it)
BAR_FORMAT = "[echoray] search {n_fmt}/{total_fmt} trials ended |{bar}| {elapsed}<{remaining}{postfix}"


@contextmanager
def search_bar(total: int) -> Iterator[Any]:
    """While a search runs: its bar (a tqdm) on a terminal, with sys.stdout written above
    it; None and nothing changed where stdout is not a terminal. TrialLines moves it."""
    global _bar
    out = sys.stdout
    if not out.isatty():
        yield None
        return
    from tqdm import tqdm
    from tqdm.contrib import DummyTqdmFile

    # The size once, from the terminal or COLUMNS / LINES; a terminal that reports 0 x 0 (a pty
    # nobody sized: `script` without a terminal, os.openpty) gets 80 x 24. Both are passed: left
    # to itself tqdm reads 0 rows as nrows -1 and draws nothing at all (tqdm 4.70 display()).
    size = shutil.get_terminal_size()
    _bar = tqdm(total=total, file=out, bar_format=BAR_FORMAT, ncols=size.columns, nrows=size.lines,
                smoothing=0)
    sys.stdout = DummyTqdmFile(out)
    try:
        yield _bar
    finally:
        sys.stdout = out
        _bar.close()
        _bar = None


def _show(ended: int, running: int) -> None:
    if _bar is not None and (_bar.n, _bar.postfix) != (ended, f"{running} running"):
        _bar.n = ended
        _bar.set_postfix_str(f"{running} running")  # redraws


def _ended(trials, trial=None) -> int:
    """Trials ended; `trial` counted as ended (Tune calls on_trial_complete before it sets
    the trial's status)."""
    return sum(t.status in ("TERMINATED", "ERROR") or t is trial for t in trials)


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

    def on_step_begin(self, iteration, trials, **info):
        _show(_ended(trials), sum(t.status == "RUNNING" for t in trials))

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
        done = _ended(trials, trial)
        print(f"[echoray] trial {_key(trial)} {what}  [{done}/{self.total or len(trials)} ended]", flush=True)
        _show(done, sum(t.status == "RUNNING" and t is not trial for t in trials))

    def on_trial_error(self, iteration, trials, trial, **info):
        print(f"[echoray] trial {_key(trial)} FAILED (see its log: {trial.path})", flush=True)
        _show(_ended(trials, trial), sum(t.status == "RUNNING" and t is not trial for t in trials))
