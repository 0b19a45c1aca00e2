"""Recovery: what lets a run survive a failure, on the worker's side and the driver's: its
checkpoints, the faults that end or restart it, and `echoray train --resume`.

    checkpoint.py         the files of one checkpoint: write, read, restore, replay
    checkpoint_store.py   local mode's kept checkpoints in the run's storage
    faults.py             the worker's periodic checkpoints and errors no retry can fix
    resume.py             continue a run whose driver died or was interrupted
    failures.py           one readable line for a failure that crossed Ray's processes
"""
