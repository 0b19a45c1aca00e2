"""`ray job submit` entrypoint for `echoray study` (same arguments, same exit status).

    ray job submit --address http://127.0.0.1:8265 --working-dir . \
        --runtime-env jobs/runtime_env.yaml \
        -- python jobs/study.py pipelines/digits_search.yaml --out runs/study \
           --variants baseline,before_augment:2,after_augment:2,batch:2

Runs the same repeated quasi-random search for each variant, then draws the report
(Figure 3: fresh examples to target relative to the baseline) into --out and onto
the study's MLflow run.
"""

import sys

from echoray.cli import entry

if __name__ == "__main__":
    entry(["study", *sys.argv[1:]])
