"""`ray job submit` entrypoint for `echoray tune` (same arguments, same exit status).

    ray job submit --address http://127.0.0.1:8265 --working-dir . \
        --runtime-env jobs/runtime_env.yaml \
        -- python jobs/tune.py pipelines/digits_search.yaml --trials 4 --repeats 5 --out runs/search

Each trial is a Train V2 run started from a Tune trial actor on the cluster; the runtime
env ships the package to all of them. Results: MLFLOW_TRACKING_URI (one parent run,
one child per trial) and the --out folder on the node that runs the job's driver.
Resume an interrupted search with `python jobs/tune.py --resume runs/search`.
"""

import sys

from echoray.cli import entry

if __name__ == "__main__":
    entry(["tune", *sys.argv[1:]])
