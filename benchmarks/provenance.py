"""How much of the machine a benchmark had to itself: the CPU share of other processes.

`foreign_cpu_share` = CPU-seconds used during the run by processes OUTSIDE the benchmark's
own process tree, over the machine's busy CPU-seconds in the same window. Own: the
benchmark's process (`root`), every process whose ancestry reaches it (its local Ray:
raylet, GCS and workers are the driver's descendants; a process keeps the parent it had
when first seen, so one reparented after its parent died stays own), and every process of
the part's session (`session`: `make bench` starts each part in a new session, so a
benchmark run by another benchmark, fashion_mnist.py's echo.py, counts its driver as own). Kernel threads are neither (they serve every process).

Inputs come from /proc: the `cpu` line of /proc/stat (busy = user + nice + system + irq +
softirq + steal, in clock ticks), /proc/uptime, and each /proc/[pid]/stat (utime + stime).
`CpuMonitor` samples them at the start, every `interval_s` in a daemon thread (to see
processes that start and end during the run), and at the end; `Tally` folds the samples
with no I/O, so the tests feed it made-up snapshots. A process's CPU after its last sample
is not seen (at most one interval's worth each); a process first seen during the run and
started after the first sample counts from zero.

A sample costs about 5 ms of CPU with 165 processes (0.5% of a core at the 1 s default).

A run whose share is above `LIMIT` was not the benchmark's alone: `run_until_quiet`
repeats it, and the report shows its file as "not a figure".
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

LIMIT = 0.05
PF_KTHREAD = 0x00200000
TICKS = os.sysconf("SC_CLK_TCK")  # clock ticks per second of /proc/stat and /proc/[pid]/stat


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    sid: int
    cpu_ticks: int  # utime + stime
    start_ticks: int  # since boot
    kernel: bool = False


@dataclass(frozen=True)
class Sample:
    uptime_ticks: int  # now, in clock ticks since boot
    busy_ticks: int  # the machine's busy time since boot (/proc/stat)
    procs: dict[int, Proc]


def parse_cpu_line(stat_text: str) -> int:
    """Busy clock ticks since boot from /proc/stat's aggregate `cpu` line (guest time is
    already inside user)."""
    for line in stat_text.splitlines():
        if line.startswith("cpu "):
            v = [int(x) for x in line.split()[1:]]
            v += [0] * (8 - len(v))
            user, nice, system, _idle, _iowait, irq, softirq, steal = v[:8]
            return user + nice + system + irq + softirq + steal
    raise ValueError("/proc/stat has no aggregate 'cpu' line")


def parse_pid_stat(text: str) -> Proc:
    """One /proc/[pid]/stat line (the command name may hold spaces and parentheses)."""
    head, _, rest = text.rpartition(")")
    pid = int(head.split("(", 1)[0])
    f = rest.split()
    # f[0] is field 3 (state): ppid 4, session 6, flags 9, utime 14, stime 15, starttime 22
    return Proc(pid=pid, ppid=int(f[1]), sid=int(f[3]), cpu_ticks=int(f[11]) + int(f[12]),
                start_ticks=int(f[19]), kernel=bool(int(f[6]) & PF_KTHREAD))


@dataclass
class Tally:
    """Folds samples of one window into own, foreign and busy CPU ticks."""

    root: int
    session: int | None = None  # a session id whose processes are own (None: the root's, if it leads one)
    first: Sample | None = None
    last: Sample | None = None
    parent: dict[tuple[int, int], int] = field(default_factory=dict)  # key -> ppid first seen
    base: dict[tuple[int, int], int] = field(default_factory=dict)  # key -> ticks at window start
    seen: dict[tuple[int, int], Proc] = field(default_factory=dict)  # key -> latest sighting
    own: set[tuple[int, int]] = field(default_factory=set)

    def add(self, s: Sample) -> None:
        if self.first is None:
            self.first = s
        self.last = s
        lead_sid = self.session if self.session is not None else self.root
        for p in sorted(s.procs.values(), key=lambda p: (p.start_ticks, p.pid)):  # parents first
            key = (p.pid, p.start_ticks)
            if key not in self.seen:
                self.parent[key] = p.ppid
                # absent from the first sample: started inside, even within the first sample's
                # clock tick (a child started at once had its first 0.09 s left out)
                started_inside = s is not self.first or p.start_ticks > self.first.uptime_ticks
                self.base[key] = 0 if started_inside else p.cpu_ticks
            self.seen[key] = p
            if p.pid == self.root or p.sid == lead_sid or \
                    self._child_of_own(key, s):
                self.own.add(key)

    def _child_of_own(self, key: tuple[int, int], s: Sample) -> bool:
        ppid = self.parent[key]
        parent = s.procs.get(ppid)
        if parent is not None:
            return (parent.pid, parent.start_ticks) in self.own
        return any(k[0] == ppid for k in self.own)  # the parent has gone since

    def result(self) -> dict:
        """{"own_cpu_s", "foreign_cpu_s", "busy_cpu_s", "foreign_cpu_share"}."""
        if self.first is None or self.last is None:
            return {"own_cpu_s": 0.0, "foreign_cpu_s": 0.0, "busy_cpu_s": 0.0, "foreign_cpu_share": 0.0}
        own = foreign = 0
        for key, p in self.seen.items():
            used = max(0, p.cpu_ticks - self.base[key])
            if key in self.own:
                own += used
            elif not p.kernel:
                foreign += used
        busy = max(0, self.last.busy_ticks - self.first.busy_ticks)
        share = min(1.0, foreign / busy) if busy else 0.0
        return {"own_cpu_s": own / TICKS, "foreign_cpu_s": foreign / TICKS, "busy_cpu_s": busy / TICKS,
                "foreign_cpu_share": round(share, 4)}


def foreign_cpu_share(samples: list[Sample], root: int, session: int | None = None) -> dict:
    """Tally.result() over `samples` in order (see the module docstring)."""
    t = Tally(root, session)
    for s in samples:
        t.add(s)
    return t.result()


def read_sample(proc: Path = Path("/proc")) -> Sample:
    """One snapshot of /proc (processes that vanish while it is read are left out)."""
    busy = parse_cpu_line((proc / "stat").read_text())
    uptime = float((proc / "uptime").read_text().split()[0])
    procs = {}
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            p = parse_pid_stat((d / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue
        procs[p.pid] = p
    return Sample(uptime_ticks=int(uptime * TICKS), busy_ticks=busy, procs=procs)


class CpuMonitor:
    """Samples /proc every `interval_s` in a daemon thread from `start()`; `result()` folds
    the samples so far plus one taken now."""

    def __init__(self, root: int | None = None, session: int | None = None, interval_s: float = 1.0):
        self.tally, self.interval_s = Tally(root or os.getpid(), session), interval_s
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="cpu-monitor")
        self.started = None

    def _sample(self) -> None:
        s = read_sample()
        with self._lock:
            self.tally.add(s)

    def start(self) -> CpuMonitor:
        self.started = time.time()
        self._sample()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._sample()
            except OSError:
                pass

    def result(self) -> dict:
        self._sample()
        with self._lock:
            return self.tally.result()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def busy_cores(window_s: float = 2.0, proc: Path = Path("/proc")) -> float:
    """The machine's busy cores (busy CPU-seconds per second, every process and the
    kernel) over the next `window_s` seconds, from /proc/stat: what is running now, where
    the 1-minute load average still carries the last minute."""
    t0, b0 = time.monotonic(), parse_cpu_line((proc / "stat").read_text())
    time.sleep(window_s)
    t1, b1 = time.monotonic(), parse_cpu_line((proc / "stat").read_text())
    return (b1 - b0) / TICKS / (t1 - t0)


def window_use(result: dict, wall_s: float) -> dict:
    """One window's CPU from a `Tally.result()` over `wall_s` seconds: the benchmark's own
    cores, the machine's busy cores and other processes' share of them."""
    wall_s = max(wall_s, 1e-9)
    return {"own_cores": round(result["own_cpu_s"] / wall_s, 3), "busy_cores": round(result["busy_cpu_s"] / wall_s, 3),
            "foreign_cpu_share": result["foreign_cpu_share"]}


def verdict(prov: object, limit: float = LIMIT) -> str | None:
    """Why a results file's `provenance` does not make it a figure, or None when it does."""
    if not isinstance(prov, dict):
        return "no provenance"
    if prov.get("clean") is False or prov.get("dirty") is True:  # "dirty": the form before this rule
        return "dirty tree"
    if prov.get("foreign_cpu_share") is None:
        return "no foreign CPU share recorded"
    missing = [k for k in ("commit", "clean", "started", "ended") if prov.get(k) is None]
    if missing:
        return f"provenance lacks {', '.join(missing)}"
    share = prov["foreign_cpu_share"]
    if share > limit:
        return f"foreign CPU share {share:.3g} > {limit:g}"
    return None


def run_until_quiet(run_once, shares, tries: int, limit: float = LIMIT) -> list[float]:
    """Calls run_once(attempts) until `shares()` (the foreign CPU shares of what that run
    wrote) are all at most `limit`, at most `tries` times; `attempts` is the list of
    earlier attempts' shares (the rerun records them). Returns every attempt's worst share."""
    attempts: list[float] = []
    for _ in range(max(1, tries)):
        run_once(list(attempts))
        worst = max(shares(), default=0.0)
        attempts.append(worst)
        if worst <= limit:
            break
    return attempts
