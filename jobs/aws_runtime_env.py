"""Print jobs/runtime_env.yaml as JSON with this shell's AWS settings added as env_vars,
for clusters whose nodes have no credentials of their own (no instance profile):

    ray job submit --address http://127.0.0.1:8265 --working-dir . \
        --runtime-env-json "$(python jobs/aws_runtime_env.py)" -- python jobs/train.py ...

The job's driver and every Ray worker of the job then read s3:// data and write
checkpoints with the same endpoint and credentials as this shell (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3, AWS_REGION,
AWS_DEFAULT_REGION: those that are set). The values become part of the job's runtime env,
which the Ray dashboard shows to whoever holds the cluster's token; on AWS prefer an
instance profile (cluster.yaml) and the plain jobs/runtime_env.yaml.
"""

import json
import os
import sys
from pathlib import Path

import yaml

PASSED = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
          "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION")


def runtime_env(base: Path, environ: dict) -> dict:
    env = yaml.safe_load(base.read_text())
    env["env_vars"] = {**env.get("env_vars", {}), **{k: environ[k] for k in PASSED if environ.get(k)}}
    return env


if __name__ == "__main__":
    base = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("runtime_env.yaml")
    print(json.dumps(runtime_env(base, dict(os.environ))))
