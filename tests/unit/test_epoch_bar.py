"""The epoch bar on a terminal (runtime/epoch_bar.py): which pass it shows and how far,
the lines printed meanwhile above it, and nothing at all where stdout is not a terminal."""

import io
import os
import sys

from echoray.runtime.epoch_bar import epoch_bar
from echoray.runtime.progress import EpochClock


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def tick(fresh, steps=7, trained=448):
    return {"t": 1.0, "steps": steps, "trained": trained, "fresh": fresh}


def test_the_bar_shows_the_pass_in_progress_and_its_fresh_examples(monkeypatch):
    term = Terminal()
    monkeypatch.setattr(sys, "stdout", term)
    with epoch_bar(EpochClock(n_train=1000, max_epochs=3)) as bar:
        assert sys.stdout is not term  # lines go above the bar
        shown = []
        for fresh in (None, 0, 250, 1000, 2999, 3000):
            bar.show(tick(fresh))
            shown.append((bar.bar.desc, bar.bar.n, bar.bar.total))
        bar.timed(12.4)
        bar.show(tick(3000, steps=47, trained=3008))
        print("[echoray] eval   1  epoch  1.00")
        assert "step 47  trained 3008  epoch ETA 12s" in bar.bar.postfix
    assert sys.stdout is term
    # None: no fresh count yet (the bar waits); the last pass ends full, never "epoch 4/3"
    assert shown == [("", 0, 1000), ("epoch 1/3", 0, 1000), ("epoch 1/3", 250, 1000), ("epoch 2/3", 0, 1000),
                     ("epoch 3/3", 999, 1000), ("epoch 3/3", 1000, 1000)]
    assert "[echoray] eval   1  epoch  1.00\n" in term.getvalue()


def test_no_bar_and_nothing_changed_where_stdout_is_not_a_terminal(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    with epoch_bar(EpochClock(n_train=1000, max_epochs=3)) as bar:
        assert bar is None and sys.stdout is out
    assert out.getvalue() == ""


def drained(master: int) -> bytes:
    """All a pty's slave side wrote, once every descriptor of the slave is closed."""
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the slave side is closed and all was read
            return out
        if not chunk:
            return out
        out += chunk


def test_a_pty_that_reports_no_size_still_shows_the_bar(monkeypatch):
    # os.openpty (like `script` run without a terminal) gives a 0 x 0 window: tqdm, left to read
    # it, takes nrows -1 and draws nothing; the bar is sized 80 x 24 (shutil's fallback) instead
    master, slave = os.openpty()
    assert os.get_terminal_size(slave) == (0, 0)
    term = os.fdopen(slave, "w", encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", term)
    monkeypatch.setattr(sys, "__stdout__", term)
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    with epoch_bar(EpochClock(n_train=1000, max_epochs=3)) as bar:
        bar.show(tick(250))
    term.close()
    shown = drained(master).decode()
    os.close(master)
    assert "\r[echoray] epoch 1/3 |" in shown and " 25%, step 7  trained 448  epoch ETA ?" in shown
