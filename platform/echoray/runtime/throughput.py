"""Throughput of the pipeline's parts and the measured R (pure bookkeeping).

Each preprocessing stage reports (actor, rows, busy seconds); workers report
(trained samples, seconds inside the train step). Samples, not rows: a sample's M
batch-augmentation views count once (once per group in grouped mode), so the
downstream rate is samples/s and R for M = 4 differs from M = 1 only by what the
extra views really cost, and `factor: auto` does not mistake views for echoes. A stage's rate is the
sum over its actors of each one's rows per busy second, counting only actors that did
work (in a window from `since`, only those that worked in the window), so an idle
actor of an autoscaled pool, or one that died, does not inflate it; a chain of pools
runs as fast as its slowest pool; data-parallel workers add up. R = downstream rate /
upstream rate, i.e. t_up / t_down per example, the paper's ratio.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field, replace

# The preprocessing actor reports the work before the echo point as "upstream" and,
# when echo precedes augmentation, the augmentation of echoed rows as "downstream".
UPSTREAM = ("upstream",)
# Reports kept per stage for recent_stage_rate: at least REPORTS_KEPT, and KEPT_PER_ACTOR
# per reporting actor (an actor reports at most every 0.5 s: runtime/collector_feed.py), so
# a pool of any size keeps every actor's last 4 reports and a window's worth of each.
REPORTS_KEPT = 512
KEPT_PER_ACTOR = 16


@dataclass(frozen=True)
class Report:
    at: float
    actor: str
    rows: float
    busy_s: float


@dataclass
class Totals:
    rows: float = 0.0
    busy_s: float = 0.0


@dataclass
class WorkerTotals(Totals):
    """A worker's trained samples and step time, and its time waiting for its input and
    the fresh examples it trained (all cumulative)."""
    wait_s: float = 0.0
    fresh: float = 0.0


@dataclass
class Throughput:
    stages: dict[str, dict[str, Totals]] = field(default_factory=lambda: defaultdict(dict))
    workers: dict[int, WorkerTotals] = field(default_factory=dict)
    reports: dict[str, deque[Report]] = field(default_factory=lambda: defaultdict(lambda: deque(maxlen=REPORTS_KEPT)))

    def add_stage(self, stage: str, actor: str, rows: int, busy_s: float, at: float = 0.0) -> None:
        t = self.stages[stage].setdefault(actor, Totals())
        t.rows += rows
        t.busy_s += busy_s
        log = self.reports[stage]
        if (need := KEPT_PER_ACTOR * len(self.stages[stage])) > log.maxlen:
            log = self.reports[stage] = deque(log, maxlen=need)
        log.append(Report(at, actor, rows, busy_s))

    def recent_stage_rate(self, stage: str, since: float, min_reports: int) -> float | None:
        """A stage's rate (as stage_rate: per-actor rows per busy second, summed over the
        actors that worked) over the reports after `since`, reaching back to the stage's
        last min_reports per known actor where the window holds fewer. An actor reports
        once per call, and a call can take seconds with rows that vary by call (text units
        of different sizes): a short window would hold no report, or one call's rate."""
        log = self.reports.get(stage)
        if not log:
            return None
        recent = [r for r in log if r.at > since]
        if len(recent) < (need := min_reports * len(self.stages[stage])):
            recent = list(log)[-need:]
        per_actor: dict[str, Totals] = {}
        for r in recent:
            t = per_actor.setdefault(r.actor, Totals())
            t.rows += r.rows
            t.busy_s += r.busy_s
        rates = [t.rows / t.busy_s for t in per_actor.values() if t.rows > 0 and t.busy_s > 0]
        return sum(rates) if rates else None

    def set_worker(self, rank: int, trained: int, step_s: float, wait_s: float = 0.0, fresh: int = 0) -> None:
        """Cumulative figures from one worker (replaces the previous report)."""
        self.workers[rank] = WorkerTotals(trained, step_s, wait_s, fresh)

    def consumer_totals(self) -> tuple[float, float, int]:
        """(mean wait per worker in seconds, fresh examples of all workers, workers)."""
        if not self.workers:
            return 0.0, 0.0, 0
        return (sum(w.wait_s for w in self.workers.values()) / len(self.workers),
                sum(w.fresh for w in self.workers.values()), len(self.workers))

    def stage_rate(self, stage: str) -> float | None:
        rates = [t.rows / t.busy_s for t in self.stages.get(stage, {}).values() if t.rows > 0 and t.busy_s > 0]
        return sum(rates) if rates else None

    def train_rate(self) -> float | None:
        rates = [t.rows / t.busy_s for t in self.workers.values() if t.busy_s > 0 and t.rows > 0]
        return sum(rates) if rates else None

    def rates(self) -> tuple[float | None, float | None]:
        up = [r for s in self.stages if s in UPSTREAM and (r := self.stage_rate(s))]
        down = [r for s in self.stages if s not in UPSTREAM and (r := self.stage_rate(s))]
        if (t := self.train_rate()) is not None:
            down.append(t)
        return (min(up) if up else None), (min(down) if down else None)

    def recent_upstream_rate(self, since: float, min_reports: int) -> float | None:
        """rates()'s upstream figure over recent_stage_rate's reports."""
        up = [r for s in self.stages if s in UPSTREAM and (r := self.recent_stage_rate(s, since, min_reports))]
        return min(up) if up else None

    def measured_r(self) -> float | None:
        up, down = self.rates()
        return down / up if up and down else None

    def snapshot(self) -> Throughput:
        copy = Throughput()
        for s, actors in self.stages.items():
            for a, t in actors.items():
                copy.stages[s][a] = Totals(t.rows, t.busy_s)
        copy.workers = {r: replace(t) for r, t in self.workers.items()}
        return copy

    def since(self, earlier: Throughput) -> Throughput:
        """What happened between `earlier` and now (for a recent-window R)."""
        d = Throughput()
        for s, actors in self.stages.items():
            for a, t in actors.items():
                e = earlier.stages.get(s, {}).get(a, Totals())
                d.stages[s][a] = Totals(t.rows - e.rows, t.busy_s - e.busy_s)
        for r, t in self.workers.items():
            e = earlier.workers.get(r, WorkerTotals())
            d.workers[r] = WorkerTotals(t.rows - e.rows, t.busy_s - e.busy_s, t.wait_s - e.wait_s, t.fresh - e.fresh)
        return d
