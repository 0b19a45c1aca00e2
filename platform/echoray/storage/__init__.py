"""Storage: where a run's data, checkpoints and folders live (a local folder, a shared mount or
an object store URI), and how a store that stops answering is waited out.

    fs.py                 open a location, the shared-storage rule, bounded S3 timeouts, uploads
    retry.py              which store errors are retried, for how long (RetryPolicy)
    retrying_fs.py        a filesystem that retries every call (Ray Train's and Tune's writes),
                          with retrying_requests.py and retrying_streams.py
    locations.py          where a run folder and the default MLflow store go
"""
