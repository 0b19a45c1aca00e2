"""On a terminal, a bar of the current epoch under the run's lines: the fresh examples of
this pass over the training set (echoray/epochs.py), the step, the examples trained and
the epoch's ETA from the latest progress figures; the evaluation lines and everything
else printed meanwhile go above it. Where stdout is not a terminal (a log file, a Ray job,
a notebook, a Tune trial) nothing changes: the plain progress lines of runtime/progress.py."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from echoray.runtime.progress import EpochClock

BAR_FORMAT = "[echoray] {desc} |{bar}| {percentage:3.0f}%{postfix}"  # tqdm puts ", " before a postfix


class EpochBar:
    """The bar's figures from the collector's heartbeats (runtime/progress.py Tick fields)."""

    def __init__(self, bar, clock: EpochClock):
        self.bar, self.clock = bar, clock
        self.eta = "?"

    def show(self, tick: dict | None) -> None:
        """Every poll of the collector: the pass in progress and how far it is."""
        if tick is None or tick.get("fresh") is None:
            return
        n, fresh = self.clock.n_train, tick["fresh"]
        done = min(fresh // n, (self.clock.max_epochs or fresh // n + 1) - 1)  # passes before this one
        of = f"/{self.clock.max_epochs}" if self.clock.max_epochs else ""
        self.bar.total = n
        self.bar.n = min(fresh - done * n, n)
        self.bar.set_description_str(f"epoch {done + 1}{of}", refresh=False)
        self.bar.set_postfix_str(f"step {tick['steps']}  trained {tick['trained']}  epoch ETA {self.eta}")

    def timed(self, eta_s: float | None) -> None:
        """The epoch's ETA from the latest progress figures (every train.log_every_s)."""
        self.eta = "?" if eta_s is None else f"{eta_s:.0f}s"


@contextmanager
def epoch_bar(clock: EpochClock) -> Iterator[EpochBar | None]:
    """While a run trains: its EpochBar on a terminal, sys.stdout written above it; None
    and nothing changed otherwise."""
    out = sys.stdout
    if not out.isatty():
        yield None
        return
    from tqdm import tqdm
    from tqdm.contrib import DummyTqdmFile

    # rows and columns both given: a pty that reports 0 x 0 gets 80 x 24 (tune/progress.py says why)
    size = shutil.get_terminal_size()
    bar = tqdm(total=clock.n_train, file=out, bar_format=BAR_FORMAT, ncols=size.columns, nrows=size.lines,
               leave=False)
    sys.stdout = DummyTqdmFile(out)
    try:
        yield EpochBar(bar, clock)
    finally:
        sys.stdout = out
        bar.close()
