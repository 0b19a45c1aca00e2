"""What echoray says on the console: the `[echoray]` line, a run's start line, its evaluation
lines, and the summary with where the run's files and MLflow run are (and how to open the
UI from there). Everything here prints or formats; nothing decides how a run goes."""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path
from typing import Any

from echoray.config import PipelineConfig
from echoray.data.sources import SourceIndex
from echoray.storage.locations import in_ray_job


def say(msg: str) -> None:
    print(f"[echoray] {msg}", flush=True)


def epoch_line(ev: dict[str, Any]) -> str:
    """An evaluation's line: its index, the epoch it fell at (passes of fresh data,
    echoray/epochs.py), what it scored and counted."""
    tta = f" (tta {ev['accuracy_tta']:.4f})" if ev.get("accuracy_tta") is not None else ""
    score = (f"acc {ev['accuracy']:.4f}{tta}" if ev.get("bits_per_byte") is None  # a language model's:
             else f"bpb {ev['bits_per_byte']:.4f}  ppl {ev['perplexity']:.2f}")
    return (
        f"eval {ev['epoch']:>3}  epoch {ev['data_epochs']:5.2f}  step {ev['step']:>6}  loss {ev['loss']:.4f}  "
        f"{score}  fresh {ev['fresh_examples']:>8}  trained {ev['trained_examples']:>8}  "
        f"lr {ev['lr']:.4f}  training {ev['elapsed_s']:.1f}s"
    )


def quiet_console() -> bool:
    """Under `echoray train` without --verbose: the libraries' output to a log file
    (echoray/console.py), RUN_DIR/console.log once the run folder exists."""
    from echoray import console

    return console.divert()


def say_console_log(run_dir: Path) -> None:
    """Name the run's log file once it is in the run folder, with echoray's words for the
    library warnings the user can act on."""
    from echoray import console

    log_file = console.settle(run_dir)
    if log_file is not None:
        say(f"Ray's and MLflow's messages: {log_file} (--verbose prints them here)")
        for line in console.advice():
            say(line)


def say_quiet_start() -> None:
    """`tune`, `study`, `bench-input` without --verbose: the libraries' output to a log file
    from now on, named at once (a temporary file; say_console_log moves it into the output
    folder when the command ends, or the CLI names it again if it fails first)."""
    from echoray import console

    if quiet_console():
        say(f"Ray's and MLflow's messages: {console.log_path()} (--verbose prints them here)")
        for line in console.advice():
            say(line)


def _workers(cfg: PipelineConfig) -> str:
    s = cfg.scaling
    return f"{s.min_workers} to {s.max_workers} (elastic)" if s.elastic else str(s.max_workers)


def say_start(cfg: PipelineConfig, idx: SourceIndex, run_dir: Path, run_id: str, use_gpu: bool,
               here: bool) -> None:
    say(f"run {run_dir}  |  MLflow run {run_id}  |  {len(idx.train_ids)} train / {len(idx.eval_ids)} "
        f"held-out examples  |  {_workers(cfg)} worker(s) on {'GPU' if use_gpu else 'CPU'}"
        + (" (Ray Train local mode: in this process)" if here else ""))


def say_own_data(notes: list[str | None]) -> None:
    """The defaults `echoray train --set source.path=...` fitted to the data (own_data.py)."""
    for note in notes:
        if note:
            say(f"own data: {note}")


# What R is, said once under the throughput line (docs/concepts.md, `auto` and R).
R_MEANS = ("R = downstream / upstream examples per second: above 1 the input pipeline holds the "
           "train step back and an echo factor up to R is free")


def print_summary(s: dict[str, Any], verbose: bool = False) -> None:
    """The run's closing lines; the throughput line (upstream and downstream rates, R)
    where it means something: an input-bound run (R > 1), echo.factor auto, or `verbose`."""
    hit = "reached" if s["target_reached"] else "NOT reached"
    m = s["metric"]
    sign = "<=" if m.get("direction") == "lower is better" else ">="  # echoray/metrics.py
    goal = f"target {m['name']} {sign} {m['target']}: {hit}" if m["target"] is not None else f"no target set ({m['name']})"
    why = "" if s["stop_reason"] == "target reached" else f"; {s['stop_reason']}"  # "reached" said once
    lines = [
        f"{goal} (final {m['value']:.4f}, best {s['best_metric']:.4f}{why})",
        f"fresh examples {s['fresh_examples']}, trained {s['trained_examples']} "
        f"(measured echo factor {s['echo']['measured_factor']:.3f}), steps {s['steps']}, epochs {s['epochs']:.2f}, "
        f"evaluations {s['evaluations']}",
    ]
    if s["target_reached"]:
        lines.append(
            f"to target: {s['fresh_examples_to_target']} fresh examples, {s['steps_to_target']} steps, "
            f"{s['time_to_target_s']:.1f} s"
        )
    if (t := s.get("text")) is not None:
        rate = f", {t['trained_tokens'] / s['train_loop_s']:,.0f} trained tokens/s" if s.get("train_loop_s") else ""
        lines.append(f"text: {t['fresh_tokens']:,} fresh tokens of {t['train']['sequences'] * t['seq_len']:,} per "
                     f"epoch ({t['tokenizer']} tokenizer, vocab {t['vocab_size']}, seq_len {t['seq_len']}){rate}")
    ft = s["time_to_first_step_s"]
    lines.append(f"wall {s['wall_s']:.1f} s" + (f", first step at {ft:.1f} s" if ft else ""))
    auto = s["echo"]["factor"] == "auto"
    if s["measured_R"] and (s["measured_R"] > 1 or auto or verbose):
        lines.append(f"throughput: upstream {s['upstream_examples_per_s']:.0f} ex/s, downstream "
                     f"{s['downstream_examples_per_s']:.0f} ex/s, measured R {s['measured_R']:.2f}"
                     + (f", echo factor now {s['echo']['final_factor']:.2f}" if auto else ""))
        lines.append(R_MEANS)
    lines.extend(where_lines(s, in_ray_job(), socket.gethostname(), mlflow_command()))
    for line in lines:
        say(line)
    sys.stdout.flush()


# MLflow 3.17's UI shows an experiment in its GenAI or Model training view by a global
# switch the browser remembers (default GenAI), not by the experiment's
# mlflow.experimentKind tag; this parameter of the address selects Model training.
MODEL_TRAINING_VIEW = "?workflowType=machine_learning"


def run_url(s: dict[str, Any], server: str | None = None) -> str:
    """The run's page in the MLflow UI (server: where the UI is, else the tracking server)."""
    base = (server or s["mlflow_tracking_uri"]).rstrip("/")
    return f"{base}/#/experiments/{s['mlflow_experiment_id']}/runs/{s['mlflow_run_id']}{MODEL_TRAINING_VIEW}"


def mlflow_command() -> str:
    """`mlflow` if the shell finds it, else the one next to this Python (`make run` does not
    activate .venv, so the printed command must work without it)."""
    if shutil.which("mlflow"):
        return "mlflow"
    return str(Path(sys.executable).parent / "mlflow")


def where_lines(s: dict[str, Any], in_job: bool, host: str, mlflow_cmd: str = "mlflow") -> list[str]:
    """Where the run's files and its MLflow run are, and how to open the UI from there."""
    summary = Path(s["run_dir"]) / "summary.json"
    uri = s["mlflow_tracking_uri"]
    if not in_job:
        lines = [f"summary: {summary}"]
        if uri.startswith("sqlite:"):
            lines.append(f"MLflow UI: {mlflow_cmd} ui --backend-store-uri {uri}   (then open "
                         f"{run_url(s, 'http://127.0.0.1:5000')})")
        elif uri.startswith(("http://", "https://")):
            lines.append(f"MLflow UI: {run_url(s)}")
        else:
            lines.append(f"MLflow: {uri}  (run {s['mlflow_run_id']})")
        return lines
    lines = [f"run folder: {summary.parent} on {host} (the node of the job's driver)",
             f"its files (config.yaml, summary.json, audit.parquet if on) are the MLflow run's artifacts: "
             f"{s.get('mlflow_artifact_uri') or 'see the run'}"]
    if uri.startswith(("http://", "https://")):
        lines.append(f"MLflow UI: {run_url(s)}  (from outside the cluster: forward that port with ssh -L, "
                     "docs/how-to/cluster.md, \"MLflow UI\")")
    elif uri.startswith("sqlite:"):
        lines.append(f"MLflow store {uri} on {host}; the UI, there: {mlflow_cmd} ui --backend-store-uri {uri} "
                     "(a cluster's head exports MLFLOW_TRACKING_URI of its tracking server instead)")
    else:
        lines.append(f"MLflow: {uri}  (run {s['mlflow_run_id']})")
    return lines
