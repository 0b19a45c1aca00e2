"""The driver's watch over a run: what the process that started the fit does while it runs,
and how it stops it.

    monitor.py   watch_fit: progress lines, final evaluations to MLflow, stalls, the fit thread
    stop.py      stop a fit at a step boundary; leave the process without killing threads
    signals.py   SIGTERM ends a run the way Ctrl-C does (the run stays resumable)
"""
