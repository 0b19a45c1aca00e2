"""Accounting: how a run counts its examples, exactly, across echo copies, ranks and restarts.

    fresh.py        a sample is fresh when its first echo copy is trained (FreshTracker)
    counters.py     the fresh and trained counters, the audit rows they are checked against
    loop_state.py   everything the worker loop counts, saved and restored as one object
    consumed.py     the rows a step consumed, so a restored stream skips them (ConsumedLog)
"""
