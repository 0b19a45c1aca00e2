"""The driver's trial lines (tune/progress.py): a trial's end is counted against the
search's size, whatever number of trials Tune has made so far; on a terminal a bar of the
ended trials sits under them."""

import io
import os
import pickle
import sys
from types import SimpleNamespace

from echoray.tune.progress import TrialLines, search_bar


def trial(index, status="RUNNING", result=None):
    return SimpleNamespace(config={"repeat": 0, "index": index, "params": {"optimizer.lr": 0.05}},
                           status=status, last_result=result, path=f"/exp/t{index}")


REACHED = {"target_reached": True, "fresh_examples_to_target": 2816}
MISSED = {"target_reached": False, "metric_name": "accuracy", "best_metric": 0.4375}


def test_the_first_trial_to_end_of_two_is_one_of_two_while_tune_holds_only_it(capsys):
    # search.max_concurrent 1: Tune asks for the second point only after the first ended
    first = trial(0, result=REACHED)
    TrialLines(total=2).on_trial_complete(1, [first], first)
    assert capsys.readouterr().out == ("[echoray] trial r0-t0 reached the target after 2816 fresh "
                                       "examples  [1/2 ended]\n")


def test_ended_and_failed_trials_count_and_a_missed_target_shows_the_best_metric(capsys):
    done, failed, last = trial(0, "TERMINATED", REACHED), trial(1, "ERROR"), trial(2, result=MISSED)
    TrialLines(total=4).on_trial_complete(7, [done, failed, last, trial(3)], last)
    assert capsys.readouterr().out == ("[echoray] trial r0-t2 did not reach the target (best accuracy "
                                       "0.4375)  [3/4 ended]\n")


def test_a_callback_pickled_without_the_total_counts_the_trials_tune_holds(capsys):
    old = TrialLines()
    del old.total  # as a search started before `total` existed unpickles it
    old = pickle.loads(pickle.dumps(old))
    first = trial(0, result=REACHED)
    old.on_trial_complete(1, [first, trial(1)], first)
    assert capsys.readouterr().out.endswith("  [1/2 ended]\n")


class Terminal(io.StringIO):
    """Stands for a terminal: what is written, and isatty() true."""

    def isatty(self):
        return True


def test_on_a_terminal_a_bar_counts_ended_trials_under_the_lines(monkeypatch):
    term = Terminal()
    monkeypatch.setattr(sys, "stdout", term)
    lines = TrialLines(total=3)
    first, second = trial(0, result=REACHED), trial(1)
    with search_bar(3) as bar:
        assert bar is not None and sys.stdout is not term  # what is printed goes above the bar
        lines.on_step_begin(0, [first, second])
        assert (bar.n, bar.postfix) == (0, "2 running")
        lines.on_trial_complete(1, [first, second], first)
        assert (bar.n, bar.postfix) == (1, "1 running")
        print("a line Ray forwards from a trial")
    assert sys.stdout is term
    out = term.getvalue()
    assert "[echoray] search 1/3 trials ended |" in out and "1 running" in out
    # the lines stay whole, each on its own line, printed before the bar was redrawn under them
    assert "\n[echoray] trial r0-t0 reached the target after 2816 fresh examples  [1/3 ended]\n" in \
        out.replace("\r", "\n")
    assert "\na line Ray forwards from a trial\n" in out.replace("\r", "\n")


def test_elsewhere_no_bar_and_the_lines_alone(capsys):
    first = trial(0, result=REACHED)
    with search_bar(2) as bar:
        assert bar is None
        TrialLines(total=2).on_step_begin(0, [first])
        TrialLines(total=2).on_trial_complete(1, [first], first)
    assert capsys.readouterr().out == ("[echoray] trial r0-t0 reached the target after 2816 fresh "
                                       "examples  [1/2 ended]\n")


def test_a_pty_that_reports_no_size_still_shows_the_bar(monkeypatch):
    # a 0 x 0 pty (os.openpty, `script` without a terminal): tqdm alone would draw nothing there
    master, slave = os.openpty()
    term = os.fdopen(slave, "w", encoding="utf-8")
    for name in ("stdout", "__stdout__"):
        monkeypatch.setattr(sys, name, term)
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    with search_bar(4) as bar:
        assert bar is not None
        TrialLines(total=4).on_step_begin(0, [trial(0, "TERMINATED"), trial(1)])
    term.close()
    shown = b""
    while chunk := _read(master):
        shown += chunk
    os.close(master)
    assert "\r[echoray] search 1/4 trials ended |" in shown.decode() and ", 1 running" in shown.decode()


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the slave side is closed and all was read
        return b""
