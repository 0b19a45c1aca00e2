"""`ray job submit` entrypoint for `echoray train` (same arguments, same exit status).

    ray job submit --address http://127.0.0.1:8265 --working-dir . \
        --runtime-env jobs/runtime_env.yaml \
        -- python jobs/train.py pipelines/digits.yaml --set train.max_epochs=5

The runtime env ships the package (`py_modules: [platform/echoray]`) to the job's
driver and to every worker, so the cluster needs only the dependencies installed.
Inside a job, RAY_ADDRESS is set, so echoray attaches to the cluster instead of
starting a local Ray. Results go to MLFLOW_TRACKING_URI or `--set tracking.uri=...`.
"""

import sys

from echoray.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
