"""What the fault tests share (test_preprocess_actor_lost.py, test_collector_lost.py): an
`echoray train` driver in a subprocess attached to the tests' local Ray, whose console
lines are read as they come (with the time each arrived), the training step a run has
reached read from its progress lines, Ray's actors found through the public state API,
and the exact-count audit of a finished run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import ray
from ray.util.state import list_actors

# `[echoray]   epoch   0.40  step     12 ...` (a live progress line; `epoch      -` before any
# fresh count) or `[echoray] eval   1  epoch  1.00  step     30 ...` (an evaluation line)
STEP = re.compile(r"\[echoray\]\s+(?:eval\s+\d+\s+)?epoch\s+[\d.-]+\s+step\s+(\d+)\s")


# The fault tests' run: digits behind the slow store (reads are the bottleneck, ~3 s an
# epoch, so a fault lands mid-epoch), echo before augmentation at an integer factor over
# whole epochs (exact counts for any seed), trained in the driver's process.
N_TRAIN, EPOCHS, BATCH, COPIES = 640, 3, 32, 2  # 40 steps an epoch, 120 in all


def train_args(sqlite_uri: str, run: Path) -> list[str]:
    """`echoray train` arguments of the fault tests' run, into the folder `run`."""
    sets = [f"tracking.uri={sqlite_uri}", f"source.limit={N_TRAIN}", f"train.batch_size={BATCH}",
            f"train.max_epochs={EPOCHS}", "train.target=null", "train.checkpoint_every=1", "echo.stage=before_augment",
            f"echo.factor={COPIES}", "audit.enabled=true", "scaling.local_mode=true", "train.log_every_s=0.3",
            "source.kind=slow_store:SlowStore", "source.options={inner: digits, latency_ms: 80}"]
    return ["train", *(a for s in sets for a in ("--set", s)), "--out", str(run)]


def echoray_bin() -> str:
    return str(Path(sys.executable).parent / "echoray")


class Driver:
    """`echoray ARGS` in a subprocess attached to the tests' local Ray (as a `ray job submit`
    driver attaches), its output collected line by line with each line's arrival time.
    `env`: the driver's whole environment instead (another Ray's address and token)."""

    def __init__(self, args: list[str], cwd: Path, env: dict | None = None):
        env = env or {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
        self.proc = subprocess.Popen([echoray_bin(), *args], cwd=cwd, env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.time(), line))
            print(f"{time.monotonic():.1f} {line}", end="", flush=True)

    def steps(self, since: float = 0.0) -> list[tuple[float, int]]:
        """(arrival time, step) of every progress or epoch line that came after `since`."""
        return [(t, int(m.group(1))) for t, line in list(self.lines) if t > since and (m := STEP.search(line))]

    def wait_for_step(self, step: int, timeout_s: float = 300, since: float = 0.0) -> tuple[float, int]:
        """The first line after `since` that shows a training step >= `step`."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            hit = next(((t, s) for t, s in self.steps(since) if s >= step), None)
            if hit:
                return hit
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no step >= {step} in:\n{self.output[-4000:]}")

    def finish(self, timeout_s: float = 600) -> int:
        rc = self.proc.wait(timeout=timeout_s)
        self._reader.join(timeout=10)
        return rc

    @property
    def output(self) -> str:
        return "".join(line for _, line in self.lines)


def alive_actors(class_part: str) -> list:
    """ALIVE actors of this Ray (its address explicitly: other Rays may run on the machine)
    whose class name contains `class_part`, through Ray's public state API."""
    actors = list_actors(address=ray.get_runtime_context().gcs_address, filters=[("state", "=", "ALIVE")],
                         limit=10_000, detail=True)
    return [a for a in actors if class_part in a.class_name]


def assert_each_copy_once(audit: dict, n_train: int, epochs: int, copies: int) -> Counter:
    """Every (epoch, sample) of every epoch exactly `copies` times, each copy (view) once,
    whatever the worker count; returns the count per (epoch, sample)."""
    per_pair = Counter(zip(audit["epoch"], audit["sample_id"], strict=True))
    assert Counter(e for e, _ in per_pair) == {e: n_train for e in range(epochs)}  # every epoch complete
    assert set(per_pair.values()) == {copies}  # no pair more often than its echo copies, none fewer
    assert set(Counter(zip(audit["epoch"], audit["sample_id"], audit["view"], strict=True)).values()) == {1}
    return per_pair


def assert_two_workers_then_one(audit: dict, at: int, trained: int, batch: int) -> list[tuple[int, int]]:
    """Steps before `at` trained by workers 0 and 1, `batch` examples each; from `at` on,
    worker 0 alone trains the rest of the run's `trained` examples. Returns the later
    (step, worker) rows."""
    rows = list(zip(audit["step"], audit["worker"], strict=True))
    before = Counter(r for r in rows if r[0] < at)
    after = [r for r in rows if r[0] >= at]
    assert before == {(st, w): batch for st in range(at) for w in (0, 1)}
    assert {w for _, w in after} == {0} and len(after) == trained - 2 * batch * at
    return after


def assert_exact_counts(summary: dict, run_dir: Path, n_train: int, epochs: int, copies: int, batch: int) -> None:
    """An integer echo factor over whole read-plan epochs, as an unfailed run of any seed
    trains it: every (epoch, sample) of every epoch exactly `copies` times, each copy once;
    fresh = the distinct (epoch, sample) trained, at the end and at every epoch; full
    batches, each step once."""
    audit = pq.read_table(run_dir / "audit.parquet").to_pydict()
    pairs = list(zip(audit["epoch"], audit["sample_id"], strict=True))
    per_pair = assert_each_copy_once(audit, n_train, epochs, copies)
    steps = n_train * epochs * copies // batch
    assert Counter(audit["step"]) == {s: batch for s in range(steps)}
    assert summary["fresh_examples"] == len(per_pair) == n_train * epochs
    assert summary["trained_examples"] == len(pairs) == n_train * epochs * copies
    assert summary["steps"] == steps
    assert [h["fresh_examples"] for h in summary["history"]] == [
        len({p for p, s in zip(pairs, audit["step"], strict=True) if s < h["step"]}) for h in summary["history"]]
