"""StartedStream (train/early_stream.py): the first item asked for at once, each next one
as soon as the one before is handed out, poll() says whether it is here without waiting,
order and end are kept."""

import threading

from echoray.train.early_stream import StartedStream


def eventually(condition, timeout_s: float = 10.0) -> bool:
    """Whether `condition` holds within timeout_s (checked every 10 ms)."""
    done = threading.Event()
    for _ in range(int(timeout_s / 0.01)):
        if condition():
            return True
        done.wait(0.01)
    return condition()


def gated(n, gates):
    for i in range(n):
        gates[i].wait(10)
        yield {"i": i}


def test_poll_says_whether_the_next_item_is_here_without_waiting_for_it():
    gates = [threading.Event() for _ in range(3)]
    stream = StartedStream(gated(3, gates))
    assert not stream.poll()  # item 0 is asked for at once, its gate is shut
    gates[0].set()
    it = iter(stream)
    assert next(it) == {"i": 0}
    assert not stream.poll()  # item 1 is asked for already; poll does not wait for it
    gates[1].set()
    stream._next.result(timeout=10)
    assert stream.poll() and next(it) == {"i": 1}
    gates[2].set()
    assert next(it) == {"i": 2}
    stream._next.result(timeout=10)
    assert stream.poll()  # the end is here too
    assert list(it) == []


def test_the_next_item_is_asked_for_as_soon_as_one_is_handed_out():
    """The consumer trains on item i while item i + 1 is read: never two requests at once."""
    asked = []
    gates = [threading.Event() for _ in range(3)]

    def source():
        for i in range(3):
            asked.append(i)
            gates[i].wait(10)
            yield {"i": i}

    stream = StartedStream(source())
    gates[0].set()
    it = iter(stream)
    assert next(it) == {"i": 0}
    assert eventually(lambda: asked == [0, 1])  # the thread waits at item 1's shut gate
    gates[1].set()
    assert next(it) == {"i": 1}
    assert eventually(lambda: asked == [0, 1, 2])
    gates[2].set()
    assert next(it) == {"i": 2} and list(it) == []


def test_close_waits_for_the_request_in_flight_then_closes_the_stream():
    gates = [threading.Event() for _ in range(2)]
    closed = []

    def source():
        try:
            yield from gated(2, gates)
        finally:
            closed.append(True)

    stream = StartedStream(source())
    gates[0].set()
    it = iter(stream)
    next(it)
    assert not stream.poll()
    threading.Timer(0.2, gates[1].set).start()
    stream.close()  # returns once item 1 has come: the generator is not running when closed
    assert closed == [True]


def test_an_error_in_the_stream_reaches_the_consumer():
    def broken():
        yield {"i": 0}
        raise OSError("s3://bucket/part-1.txt: connection reset")

    stream = StartedStream(broken())
    it = iter(stream)
    assert next(it) == {"i": 0}
    stream.poll()
    stream._next.exception(timeout=10)
    try:
        next(it)
    except OSError as exc:
        assert "part-1.txt" in str(exc)
    else:
        raise AssertionError("the stream's error was lost")
