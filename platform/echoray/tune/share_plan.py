"""The search's side of shared preprocessing: groups, resources, hubs, MLflow and the report.

`plan_sharing` groups the search's trials (tune/share_groups.py) and sizes each shared
group's stream; `SharePlan.concurrency` is how many trials fit the cluster at once when a
group's preprocessing actors run once for all its trials; `start` makes one StreamHub
actor per shared group (tune/share_hub.py); `tags` is what the search's MLflow parent
run records; `finish` writes share_streams.json (each hub's report) and stops the hubs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from echoray.config import PipelineConfig
from echoray.data.sources import SourceIndex, index_source
from echoray.runtime.resources import ResourcePlan, shortfall
from echoray.tune.share_groups import ShareGroup, group_trials, stream_epochs, window_rows
from echoray.tune.share_hub import HubSpec

REPORT_FILE = "share_streams.json"


def fit_concurrency(per_trial: dict[str, float], per_producer: dict[str, float], total: dict[str, float],
                    max_concurrent: int, groups: int) -> int:
    """The most trials at once, at most max_concurrent, such that they and the producers of
    the groups they can belong to (at most one per running trial, at most `groups`) fit
    `total`; 0 when not even one does. Pure."""
    keys = set(per_trial) | set(per_producer)
    for c in range(max_concurrent, 0, -1):
        need = {k: c * per_trial.get(k, 0.0) + min(c, groups) * per_producer.get(k, 0.0) for k in keys}
        if not shortfall(need, total):
            return c
    return 0


@dataclass
class SharePlan:
    groups: list[ShareGroup]
    specs: dict[str, HubSpec] = field(default_factory=dict)  # shared group name -> its hub's spec

    @property
    def shares(self) -> bool:
        return bool(self.specs)

    def concurrency(self, plan: ResourcePlan, total: dict[str, float], max_concurrent: int) -> int:
        """Trials at once (see fit_concurrency) for trials of this resource plan. A trial of
        a shared group asks for its worker only; a private trial (if any) for its actors too."""
        worker = {k: v * plan.num_workers for k, v in plan.per_worker.items()}
        actors = {k: v * plan.actors_min for k, v in plan.per_actor.items()}
        per_trial = worker if all(g.shared for g in self.groups) else {
            k: worker.get(k, 0.0) + actors.get(k, 0.0) for k in set(worker) | set(actors)}
        return fit_concurrency(per_trial, actors, total, max_concurrent, len(self.specs))

    def tags(self) -> dict[str, str]:
        """The MLflow parent run's record: one tag per group, and a summary."""
        shared = [g for g in self.groups if g.shared]
        tags = {f"echoray.share_group.{g.name}": g.describe() for g in self.groups}
        tags["echoray.share_preprocessing"] = (f"{len(shared)} shared stream(s) for "
                                               f"{sum(len(g.trials) for g in shared)} trial(s)")
        return tags

    def start(self) -> dict[str, Any]:
        """One hub per shared group: trial key -> its hub's handle."""
        from echoray.tune.share_hub import start_hub

        hubs = {name: start_hub(spec) for name, spec in self.specs.items()}
        return {t: hubs[name] for name, spec in self.specs.items() for t in spec.trials}

    def finish(self, hubs: dict[str, Any], d: Path) -> Path | None:
        """Each hub's report into d/share_streams.json, then the hubs stopped and gone."""
        import ray

        unique = list({id(h): h for h in hubs.values()}.values())
        if not unique:
            return None
        reports = []
        for h in unique:
            try:
                ray.get(h.close.remote(), timeout=60)
                reports.append(ray.get(h.report.remote(), timeout=60))
            except Exception as exc:  # noqa: BLE001 - a dead hub: say so, never mask the search's own error
                reports.append({"error": f"the hub gave no report: {type(exc).__name__}: {exc}"})
            finally:
                ray.kill(h)
        from echoray.summary import write_json_atomic

        write_json_atomic(d / REPORT_FILE, {"groups": reports})
        return d / REPORT_FILE


def plan_sharing(configs: dict[str, PipelineConfig], cfg: PipelineConfig, idx: SourceIndex,
                 warm: bool) -> SharePlan:
    """The groups of the search's trials (trial key -> config, search order) and a hub spec
    per shared group. `idx`: the index of the search's source, cfg.source (a group whose
    trials search another source is indexed here)."""
    groups = group_trials(configs, warm)
    specs = {}
    for g in groups:
        if not g.shared:
            continue
        members = [configs[t] for t in g.trials]
        first = members[0]
        n_train = len((idx if first.source == cfg.source else index_source(first.source)).train_ids)
        rows = window_rows(members)
        specs[g.name] = HubSpec(
            group=g.name, key=g.key, config=json.loads(first.model_dump_json()), trials=g.trials,
            epochs=stream_epochs(members, rows, n_train), window_rows=rows,
            stall_timeout_s=first.train.stall_timeout_s)
    return SharePlan(groups, specs)

