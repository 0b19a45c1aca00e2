"""`echoray study`: the same repeated search for each variant (baseline, echo stages, BA),
then `echoray report` draws the papers' comparisons.

MLflow: one study run; each variant's search is its child; trials are grandchildren.
`study.json` records the variants, so `--resume DIR` skips finished variants and
resumes the one that was interrupted.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from echoray.config import PipelineConfig
from echoray.config_load import ConfigError, validate
from echoray.messages import say
from echoray.summary import write_json_atomic
from echoray.tracking import RunLogger, check_reachable, tracking_uri
from echoray.tune.search_run import STATE_FILE, SearchInterrupted, run_search
from echoray.tune.trial import set_dotted
from echoray.tune.variants import Variant, parse_variants

STUDY_FILE = "study.json"


def variant_config(base: dict[str, Any], v: Variant) -> PipelineConfig:
    tree = copy.deepcopy(base)
    for key, value in v.overrides().items():
        set_dotted(tree, key, value)
    tree["name"] = f"{base.get('name', 'pipeline')}-{v.slug}"
    return validate(tree, origin=f"variant {v.name}")


def _new_study(cfg: PipelineConfig | None, pipeline: str, variant_names: list[str] | None, out: str | None,
               trials: int | None, repeats: int | None) -> tuple[Path, dict[str, Any]]:
    """A new study's folder, MLflow run and state file, every variant checked first (exit 2)."""
    if cfg is None or not out:
        raise ConfigError("echoray study needs a PIPELINE and --out DIR (or --resume DIR)")
    d = Path(out)
    if (d / STUDY_FILE).exists():
        raise ConfigError(f"--out {d}: already holds a study; continue it with --resume {d}")
    try:
        variants = parse_variants(variant_names)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    base = cfg.model_dump(mode="json")
    for v in variants:
        variant_config(base, v)  # every variant is valid before anything starts
    uri = tracking_uri(cfg)
    check_reachable(uri)
    logger = RunLogger(uri, cfg.tracking.experiment)
    d.mkdir(parents=True, exist_ok=True)
    run_id = logger.start(run_name=f"{cfg.name}-study", params={
        "variants": ",".join(v.name for v in variants), "trials": str(trials or cfg.search.trials),
        "repeats": str(repeats or cfg.search.repeats)},
        tags={"echoray.kind": "study", "echoray.pipeline": pipeline, "echoray.run_dir": str(d.resolve())})
    state = {"pipeline": pipeline, "config": base, "variants": [v.name for v in variants],
             "trials": trials or cfg.search.trials, "repeats": repeats or cfg.search.repeats,
             "study_run_id": run_id, "tracking_uri": uri}
    write_json_atomic(d / STUDY_FILE, state)
    return d, state


def run_study(cfg: PipelineConfig | None, pipeline: str, variant_names: list[str] | None, out: str | None,
              t0: float, *, trials: int | None = None, repeats: int | None = None,
              resume: str | None = None) -> dict[str, Any]:
    if resume:
        d = Path(resume)
        if not (d / STUDY_FILE).exists():
            raise ConfigError(f"--resume {d}: no {STUDY_FILE} there, so it is not a study folder")
        state = json.loads((d / STUDY_FILE).read_text())
    else:
        d, state = _new_study(cfg, pipeline, variant_names, out, trials, repeats)
    logger = RunLogger(state["tracking_uri"], state["config"]["tracking"]["experiment"])
    logger.run_id = state["study_run_id"]
    logger.client.update_run(logger.run_id, status="RUNNING")
    status = "FAILED"
    try:
        for v in parse_variants(state["variants"]):
            vd = d / v.slug
            if (vd / "summary.json").exists():
                say(f"variant {v.name}: finished earlier ({vd / 'summary.json'})")
                continue
            say(f"variant {v.name} ({v.label})")
            if (vd / STATE_FILE).exists():
                run_search(None, state["pipeline"], None, t0, resume=str(vd))
            else:
                vcfg = variant_config(state["config"], v)
                if vcfg.train.storage_path:  # variants of studies sharing a bucket never share a folder
                    vcfg.train.storage_path = f"{vcfg.train.storage_path.rstrip('/')}/{d.resolve().name}"
                run_search(vcfg, state["pipeline"], str(vd), t0,
                           trials=state["trials"], repeats=state["repeats"],
                           parent_run_id=state["study_run_id"], tags={"echoray.variant": v.name})
        from echoray.tune.report import write_report

        report = write_report(d)
        status = "FINISHED"
        return report
    except KeyboardInterrupt as exc:  # a variant's search says how to resume it; the study is resumed whole
        status = "KILLED"
        raise SearchInterrupted(f"continue with: echoray study --resume {d}") from exc
    finally:
        logger.end(status)
