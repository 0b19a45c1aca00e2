"""An emulated slow network store for benchmarks: a source reader by import path that
wraps a built-in source kind and makes its training reads wait as reads over a network
would. echoray itself knows nothing of it (data/sources/custom.py is the reader contract).

    PYTHONPATH=benchmarks echoray train --set source.kind=slow_store:SlowStore \\
        --set source.options='{inner: digits, latency_ms: 28}'

source.options (every other source key, path, chunk_size, limit, image_size, ..., is the
source section's own and reaches the inner source unchanged):
  inner             the source kind read: digits, cifar10, idx, image_folder, parquet, text,
                    or a reader by import path.
  latency_ms        waited per store request: a GET per sample where each sample is its
                    own file (SourceIndex.shuffled_reads: image_folder), a range read per
                    piece of a text unit (a document's part within a read unit),
                    else a range read per read-plan chunk of source.chunk_size ids.
                    Requests in flight overlap: n requests take ceil(n / reads in flight)
                    latencies.
  bandwidth_mb_s    transfer rate of the bytes a read returns (text: the bytes of the
                    documents read, as stored); null: unlimited.
  change_after_s, latency_ms_after   (together) from change_after_s after this reader's
                    first read on, latency_ms_after replaces latency_ms (a store that gets
                    faster or slower mid-run; each preprocessing actor has its own clock).
  read_concurrency  reads in flight per preprocessing actor; null: 16 where the store has
                    a latency (NETWORK_READS_IN_FLIGHT), else the inner source's (the index
                    declares it, SourceIndex.read_concurrency). With latency_ms 0 it sets
                    the reads in flight of a local source (benchmarks/input_pipeline.py). Waiting, not computing: the
read sleeps after the inner read, inside the preprocessing call, so the wait counts as
the call's upstream time. Held-out reads are not slowed: R is the training input's.
The driver prints one line saying the store is emulated.

Importable in every Ray process: benchmarks/ must be on PYTHONPATH when Ray starts (the
processes of a local Ray inherit the driver's environment). benchmarks/common.py puts it
there for the benchmark scripts, tests/conftest.py for the tests; on a cluster, ship
benchmarks/ in the job's runtime env (working_dir, env_vars PYTHONPATH).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from echoray.config import SourceConfig
from echoray.data.sources import SourceError, SourceIndex, index_source, open_reader
from echoray.data.sources.base import NETWORK_READS_IN_FLIGHT

KIND = "slow_store:SlowStore"
DETAILS = "slow_store"  # SourceIndex.details key: the inner kind, the store, chunk_size


class Store(BaseModel):
    """source.options: the inner kind and the emulated store."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    inner: str
    latency_ms: Annotated[float, Field(ge=0)] = 0.0
    bandwidth_mb_s: Annotated[float, Field(gt=0)] | None = None
    change_after_s: Annotated[float, Field(gt=0)] | None = None
    latency_ms_after: Annotated[float, Field(ge=0)] | None = None
    read_concurrency: Annotated[int, Field(ge=1)] | None = None

    @model_validator(mode="after")
    def _together(self) -> Store:
        if (self.change_after_s is None) != (self.latency_ms_after is None):
            raise ValueError("change_after_s and latency_ms_after go together")
        return self

    def latency_at(self, elapsed_s: float) -> float:
        """Milliseconds per request `elapsed_s` after the reader's first read."""
        if self.change_after_s is not None and elapsed_s >= self.change_after_s:
            return self.latency_ms_after
        return self.latency_ms

    def wait_s(self, requests: int, n_bytes: int, in_flight: int, elapsed_s: float) -> float:
        """Seconds the store keeps a read waiting: ceil(requests / in_flight) latencies
        plus n_bytes at bandwidth_mb_s."""
        wait = math.ceil(requests / max(1, in_flight)) * self.latency_at(elapsed_s) / 1000.0
        if self.bandwidth_mb_s:
            wait += n_bytes / (self.bandwidth_mb_s * 1e6)
        return wait

    def has_latency(self) -> bool:
        return self.latency_ms > 0 or bool(self.latency_ms_after)


def parse_options(options: dict) -> Store:
    """source.options as a Store; SourceError naming the key otherwise."""
    try:
        store = Store.model_validate(options)
    except ValidationError as exc:
        why = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(options)'}: {e['msg'].removeprefix('Value error, ')}"
                        for e in exc.errors())
        raise SourceError(f"source.options of source.kind {KIND!r}: {why}") from None
    if store.inner == KIND:
        raise SourceError(f"source.options.inner {store.inner!r}: the slow store wraps digits, cifar10, idx, "
                          "image_folder, parquet, text or a reader by import path, not itself")
    return store


def overrides(inner: str, **store: float | None) -> list[str]:
    """The --set overrides that put source kind `inner` behind this store (options left
    None are left out): ["source.kind=slow_store:SlowStore", "source.options={...}"]."""
    given = {"inner": inner, **{k: v for k, v in store.items() if v is not None}}
    Store.model_validate(given)  # a wrong option fails here, in the benchmark, not in a run
    return [f"source.kind={KIND}", "source.options={" + ", ".join(f"{k}: {v}" for k, v in given.items()) + "}"]


class SlowStore:
    """The inner source's reader; its training reads wait as the store would."""

    clock = staticmethod(time.monotonic)  # injectable (tests)
    sleep = staticmethod(time.sleep)

    @staticmethod
    def index(cfg: SourceConfig) -> SourceIndex:
        store = parse_options(cfg.options)
        try:
            inner = SourceConfig.model_validate({**cfg.model_dump(), "kind": store.inner, "options": {}})
        except ValidationError as exc:
            why = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise SourceError(f"source.options.inner {store.inner!r}: {why}") from None
        idx = index_source(inner, retry_s=0.0)
        if store.read_concurrency is not None:
            idx.read_concurrency = store.read_concurrency
        elif store.has_latency():
            idx.read_concurrency = NETWORK_READS_IN_FLIGHT
        idx.details = {**idx.details, DETAILS: {"store": store.model_dump(), "chunk_size": cfg.chunk_size}}
        print(f"source: EMULATED slow store over {store.inner} ({store.latency_ms:g} ms per request, "
              f"{store.bandwidth_mb_s or 'unlimited'} MB/s; {KIND}): reads sleep, no network is used", flush=True)
        return idx

    def __init__(self, idx: SourceIndex):
        mine = idx.details[DETAILS]
        self.store = Store.model_validate(mine["store"])
        self.chunk_size, self.in_flight = mine["chunk_size"], idx.read_concurrency
        self.per_sample = idx.shuffled_reads  # one file per sample: a request each
        # The outer reader retries a URI's reads (half of train.stall_timeout_s): the inner one does not.
        self.inner = open_reader(dataclasses.replace(idx, kind=self.store.inner, reader=None, retry_s=0.0))
        self.first_read: float | None = None

    def requests(self, n_ids: int) -> int:
        return n_ids if self.per_sample else math.ceil(n_ids / self.chunk_size)

    def read(self, ids: np.ndarray, split: str) -> tuple[np.ndarray, np.ndarray]:
        images, labels = self.inner.read(ids, split)
        if split == "train" and len(ids):
            self._wait(self.requests(len(ids)), images.nbytes)
        return images, labels

    def read_units(self, split: str, epochs: np.ndarray, units: np.ndarray) -> dict[str, np.ndarray]:
        """Text (the inner kind "text"): a range request per piece of each unit, the bytes
        of the documents read at bandwidth_mb_s."""
        before = self.inner.bytes_read
        rows = self.inner.read_units(split, epochs, units)
        if split == "train" and len(units):
            pieces = sum(len(self.inner.d["train_units"][int(u)]) for u in units)
            self._wait(pieces, self.inner.bytes_read - before)
        return rows

    def _wait(self, requests: int, n_bytes: int) -> None:
        now = self.clock()
        if self.first_read is None:
            self.first_read = now
        wait = self.store.wait_s(requests, n_bytes, self.in_flight, now - self.first_read)
        if wait > 0:
            self.sleep(wait)  # waiting, not computing: what a network read costs
