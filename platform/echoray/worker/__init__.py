"""The worker side of a run: what hosts the training loop (train/loop.py) in a Ray Train worker,
in a worker group or in local mode, and what the loop is given to talk to the rest of the run.

    entry.py        the function handed to Ray Train (import-light)
    ray_worker.py   run_worker: the Ray pieces around a WorkerLoop
    assembly.py     one way a worker is assembled, whatever hosts it (WorkerSite)
    ports.py        what a collector link, evaluator or checkpoint sink must offer
    link.py         the link to the run's collector and the collectives among ranks
"""
