"""`ray job submit` entrypoint for `echoray train` (same arguments, same exit status).

On a cluster from cluster.yaml (`ray up cluster.yaml`, then `ray dashboard cluster.yaml`
for the tunnel), from the repository root, with RAY_AUTH_MODE=token and the cluster's token:

    ray job submit --address http://127.0.0.1:8265 --working-dir . \
        --runtime-env jobs/runtime_env.yaml \
        -- python jobs/train.py pipelines/cluster_digits.yaml --set train.storage_path=s3://$BUCKET/runs

(checkpoints in the cluster's bucket: docs/how-to/cluster.md, "A cloud cluster"; a local folder is
refused on a cluster that has or can add nodes).

On one machine, against `ray start --head`:

    ray job submit --address http://127.0.0.1:8265 --working-dir . \
        --runtime-env jobs/runtime_env.yaml \
        -- python jobs/train.py pipelines/digits.yaml --set train.max_epochs=5

The runtime env ships the package (`py_modules: [platform/echoray]`) to the job's
driver and to every worker, so the cluster needs only the dependencies installed.
Inside a job, RAY_ADDRESS is set, so echoray attaches to the cluster instead of
starting a local Ray. Progress lines and the summary go to the job's log
(`ray job logs -f ID`); the job's status is echoray's exit status (0 SUCCEEDED, else
FAILED). Results go to MLFLOW_TRACKING_URI (cluster.yaml's head exports it) or
`--set tracking.uri=...`.
"""

import sys

from echoray.cli import entry

if __name__ == "__main__":
    entry(["train", *sys.argv[1:]])
