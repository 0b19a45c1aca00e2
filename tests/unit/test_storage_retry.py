"""The object store retry policy (echoray/storage/retry.py): its exact schedule, what it
retries and what not, on errors raised by pyarrow's S3 filesystem itself against real
sockets: a closed port (connection refused), a listener that accepts and never answers
(a frozen server), and a minimal HTTP endpoint answering with the status codes S3 sends
for an overload (503 SlowDown, 500) and for a bad request (403, 404): the only way to
make pyarrow raise those without an overloaded store (moto answers 200 or 4xx)."""

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow.fs as pafs
import pytest

from echoray.data.sources.base import SourceIndex
from echoray.data.sources.retrying import RetryingReader, retrying
from echoray.storage.fs import REQUEST_TIMEOUT_S, StorageError, open_location
from echoray.storage.retry import RetryPolicy, StoreUnavailable, retryable


class Clock:
    """Time that passes only when the policy sleeps (and `per_try_s` per try)."""

    def __init__(self, per_try_s: float = 0.0):
        self.now, self.per_try_s, self.sleeps = 100.0, per_try_s, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def failing(times: int, exc: BaseException, clock: Clock | None = None):
    calls = []

    def fn():
        calls.append(1)
        if clock is not None:
            clock.now += clock.per_try_s
        if len(calls) <= times:
            raise exc
        return "ok"

    return fn, calls


def test_schedule_doubles_to_the_cap_and_ends_at_retry_s():
    assert RetryPolicy(20).schedule() == [0.5, 1, 2, 4, 8, 4.5]
    assert RetryPolicy(120).schedule() == [0.5, 1, 2, 4, 8] + [8] * 13 + [0.5]
    assert sum(RetryPolicy(120).schedule()) == 120
    assert RetryPolicy(1).schedule() == [0.5, 0.5]
    assert RetryPolicy(0).schedule() == []
    assert RetryPolicy(20).wait(1, 0.0) == 0.5 and RetryPolicy(20).wait(3, 19.5) == 0.5
    assert RetryPolicy(20).wait(3, 20.0) is None


def test_a_short_outage_is_waited_out_with_the_schedule():
    clock = Clock()
    fn, calls = failing(3, ConnectionResetError("Connection reset by peer"))
    assert RetryPolicy(20).call(fn, "source.path s3://b/d", clock=clock, sleep=clock.sleep) == "ok"
    assert clock.sleeps == [0.5, 1, 2] and len(calls) == 4


def test_a_long_outage_ends_in_one_error_naming_the_uri():
    clock = Clock(per_try_s=3.0)  # each try waits out the request timeout
    fn, calls = failing(10**6, OSError("AWS Error NETWORK_CONNECTION during GetObject operation: "
                                       "curlCode: 28, Timeout was reached"), clock)
    with pytest.raises(StoreUnavailable) as err:
        RetryPolicy(20).call(fn, "train.storage_path s3://b/runs/r", clock=clock, sleep=clock.sleep)
    # failures 0, 3.5, 7.5, 12.5 and 19.5 s after the first: waits 0.5, 1, 2, 4, then 0.5 (cut at
    # retry_s); the try started at 20 s fails at 23 s and ends it
    assert clock.sleeps == [0.5, 1, 2, 4, 0.5] and len(calls) == 6
    assert str(err.value).startswith("train.storage_path s3://b/runs/r: the object store did not answer for 23 s "
                                     "(retried for 20 s, half of train.stall_timeout_s): AWS Error NETWORK_CONNECTION")


@pytest.mark.parametrize("exc", [
    FileNotFoundError("s3://b/missing"), PermissionError("denied"), ValueError("bad bytes"),
    OSError("AWS Error ACCESS_DENIED during HeadObject operation: No response body."),
    OSError("AWS Error NO_SUCH_BUCKET during GetObject operation: The specified bucket does not exist"),
    OSError("AWS Error UNKNOWN (HTTP status 403) during HeadObject operation: No response body."),
    OSError("No space left on device"),
])
def test_errors_a_retry_cannot_fix_fail_at_once(exc):
    clock = Clock()
    fn, calls = failing(1, exc)
    with pytest.raises(type(exc)):
        RetryPolicy(60).call(fn, "source.path s3://b/d", clock=clock, sleep=clock.sleep)
    assert len(calls) == 1 and clock.sleeps == []


def test_retry_s_zero_fails_at_the_first_error():
    clock = Clock()
    fn, calls = failing(1, ConnectionRefusedError("refused"))
    with pytest.raises(StoreUnavailable):
        RetryPolicy(0).call(fn, "source.path s3://b/d", clock=clock, sleep=clock.sleep)
    assert len(calls) == 1 and clock.sleeps == []


def _s3(port: int, timeout_s: float = 1.0) -> pafs.S3FileSystem:
    return pafs.S3FileSystem(access_key="k", secret_key="s", endpoint_override=f"127.0.0.1:{port}", scheme="http",
                             region="us-east-1", connect_timeout=timeout_s, request_timeout=timeout_s,
                             retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1))


def _error(call) -> OSError:
    with pytest.raises(OSError) as err:
        call()
    return err.value


def test_pyarrow_connection_refused_is_retried():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens
    assert retryable(_error(lambda: _s3(port).get_file_info("bucket/key")))


@pytest.fixture
def silent_port():
    """A port that accepts connections (the kernel's backlog) and never answers: what a
    SIGSTOPped server looks like to a client."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    yield s.getsockname()[1]
    s.close()


def test_pyarrow_on_a_frozen_server_times_out_and_is_retried(silent_port):
    t = time.monotonic()
    exc = _error(lambda: _s3(silent_port).open_input_stream("bucket/key").read())
    assert time.monotonic() - t < 10 and retryable(exc)


def test_open_location_on_a_frozen_endpoint_fails_in_bounded_time(silent_port, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{silent_port}")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    t = time.monotonic()
    with pytest.raises(StorageError) as err:
        open_location("s3://bucket/runs", "train.storage_path")
    assert time.monotonic() - t < 4 * REQUEST_TIMEOUT_S + 10
    assert str(err.value).startswith("train.storage_path s3://bucket/runs: ")


class _Answer(BaseHTTPRequestHandler):
    status, code = 503, "SlowDown"

    def _reply(self):
        body = (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{self.code}</Code>"
                f"<Message>{self.code}</Message></Error>").encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = do_PUT = _reply

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("status, code, retried", [
    (503, "SlowDown", True), (503, "ServiceUnavailable", True), (500, "InternalError", True),
    (403, "AccessDenied", False), (404, "NoSuchBucket", False),
])
def test_pyarrow_http_errors(status, code, retried):
    handler = type("Handler", (_Answer,), {"status": status, "code": code})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        fs = _s3(server.server_address[1])
        read = _error(lambda: fs.open_input_stream("bucket/key").read())
        head = _error(lambda: fs.get_file_info("bucket/key")) if status != 404 else None
    finally:
        server.shutdown()
        server.server_close()
    assert retryable(read) is retried, str(read)
    assert head is None or retryable(head) is retried, str(head)


class _Reader:
    def __init__(self, failures: int):
        self.failures, self.calls, self.bytes_read = failures, [], 7

    def read(self, ids, split):
        self.calls.append(split)
        if len(self.calls) <= self.failures:
            raise ConnectionResetError("Connection reset by peer")
        return ids, split


def _index(**locations) -> SourceIndex:
    import numpy as np

    return SourceIndex("parquet", 2, np.arange(4), np.arange(2), 8, 3, locations=locations, retry_s=0.6)


def test_a_reader_of_an_object_store_retries_its_reads_and_names_the_split():
    idx = _index(train="source.path s3://b/train", eval="source.eval_path s3://b/eval")
    ok = retrying(_Reader(1), idx)
    assert isinstance(ok, RetryingReader) and ok.read([1, 2], "eval") == ([1, 2], "eval")
    assert ok.bytes_read == 7 and not hasattr(ok, "read_skipping")
    with pytest.raises(StoreUnavailable, match=r"^source.eval_path s3://b/eval: .*retried for 0.6 s"):
        retrying(_Reader(100), idx).read([1], "eval")


def test_a_local_reader_is_not_wrapped():
    reader = _Reader(0)
    assert retrying(reader, _index(train="source.path /data/train", eval="source.path /data/train")) is reader
    assert retrying(reader, _index()) is reader  # digits: no path


def test_an_outage_inside_a_wrapped_error_is_described_by_its_own_line():
    from echoray.recovery.failures import describe_failure

    wrapped = RuntimeError("Traceback (most recent call last):\n  ...\n"
                           "echoray.storage.retry.StoreUnavailable: source.path s3://b/d: the object store did not "
                           "answer for 13 s (retried for 10 s, half of train.stall_timeout_s): AWS Error NETWORK_CONNECTION\n\nThe above exception "
                           "was the direct cause of the following exception:\n\n"
                           "ray.exceptions.UserCodeException: UDF failed to process a data block.")
    assert describe_failure(wrapped) == ("StoreUnavailable: source.path s3://b/d: the object store did not answer "
                                         "for 13 s (retried for 10 s, half of train.stall_timeout_s): AWS Error NETWORK_CONNECTION")
    assert describe_failure(ValueError("x\nlast")) == "ValueError: last"
