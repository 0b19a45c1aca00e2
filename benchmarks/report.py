"""`make bench-report`: the README's headline table and the benchmark pages' figure tables,
written from benchmarks/results/*.json between marker comments

    <!-- bench-report:NAME -->
    ...generated...
    <!-- /bench-report:NAME -->

so a quoted figure cannot differ from its file. A results file is a figure only when its
`provenance` (benchmarks/common.py) records a clean tree and a foreign CPU share of at
most 0.05, and its commit is the report's commit (that of the `make bench` file that
ended last; a by-hand record never sets it): otherwise its rows say "not a figure (reason)", and a file no run has written yet
says "no results yet". tests/unit/test_bench_report.py checks that the committed tree is
what this writes.

    python benchmarks/report.py           # rewrite the tables in place
    python benchmarks/report.py --check   # exit 1 naming each file it would change
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import parts as plist
import provenance as cpu

REPO = Path(__file__).resolve().parents[1]
NO_RESULTS = "no results yet"
# what an extract raises when a results file lacks what it reads (an older schema)
EXTRACT_ERRORS = (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, StopIteration)


@dataclass
class Results:
    """Every results file's record (None: absent) and reason not to quote it (None: a figure)."""

    records: dict[str, dict | None]
    reasons: dict[str, str | None]
    commit: str | None

    def figure(self, name: str) -> dict | None:
        return self.records.get(name) if self.reasons.get(name, NO_RESULTS) is None else None

    def record(self, name: str) -> dict | None:
        """A clean, quiet run's file at whatever commit (a by-hand record), else None."""
        rec = self.records.get(name)
        return rec if rec is not None and cpu.verdict(rec.get("provenance")) is None else None

    def status(self, name: str) -> str:
        reason = self.reasons.get(name, NO_RESULTS)
        if reason is None:
            return f"figure (commit {self.commit[:7]})"
        return reason if reason == NO_RESULTS else f"not a figure ({reason})"


def _read(path: Path) -> dict | None:
    if not path.exists():
        return None
    try:
        rec = json.loads(path.read_text())
    except json.JSONDecodeError:
        return {"provenance": "unreadable JSON"}
    return rec if isinstance(rec, dict) else {}


def load(results_dir: Path, names: list[str]) -> Results:
    """The records of `names` (and every *.json in results_dir) with their reasons."""
    names = sorted(set(names) | {p.name for p in results_dir.glob("*.json")})
    records = {n: _read(results_dir / n) for n in names}
    reasons = {n: NO_RESULTS if r is None else cpu.verdict(r.get("provenance")) for n, r in records.items()}
    quiet = [records[n]["provenance"] for n in names if reasons[n] is None]
    # a record no part writes (a by-hand run, benchmarks/parts.py) never sets the commit
    bench = [records[n]["provenance"] for n in names if reasons[n] is None and plist.part_of(n)] or quiet
    commit = max(bench, key=lambda p: p["ended"])["commit"] if bench else None
    for n in names:
        if reasons[n] is None and records[n]["provenance"]["commit"] != commit:
            other = records[n]["provenance"]["commit"][:7]
            reasons[n] = (f"commit {other}, the others at {commit[:7]}" if plist.part_of(n)
                          else f"a record of commit {other}, not in make bench")
    return Results(records, reasons, commit)


def quoted(res: Results, files: tuple[str, ...], extract) -> str:
    """extract(*records) when every file is a figure, else the first file's status."""
    for f in files:
        if res.figure(f) is None:
            return res.status(f)
    try:
        return extract(*(res.records[f] for f in files))
    except EXTRACT_ERRORS as exc:
        return f"not a figure (its results file lacks {exc!s})"


def mm(d: dict, fmt: str = "{:.2f}") -> str:
    """'mean [min, max]' of a {mean|median, min, max} summary."""
    mid = d["mean"] if "mean" in d else d["median"]
    return f"{fmt.format(mid)} [{fmt.format(d['min'])}, {fmt.format(d['max'])}]"


# --- the headline rows: (label, results files, extract(records...) -> text, page) -------------

def startup_arm(rec: dict, trainer: str) -> dict:
    """The summary of startup.py's `--trainers` value (labelled by the key it set)."""
    return next(v for k, v in rec["summary"].items()
                if k.endswith((f"in_process={trainer}", f"local_mode={trainer}")))


def h_startup(rec: dict) -> str:
    s = startup_arm(rec, "auto")
    return (f"the default run: **{s['wall_s']['median']:.1f} s** from command to exit, first training step at "
            f"{s['time_to_first_step_s']['median']:.1f} s (medians of {rec['provenance']['repeats']})")


def auto_row(level: dict) -> dict:
    return next(r for r in level["rows"] if r["factor"] == "auto")


def h_echo_images(*levels: dict) -> str:
    cells = [f"**{auto_row(lv)['time_to_target']['speedup_from_start']:.2f}x** at R ~ {lv['R']:.1f} "
             f"(from the first step {auto_row(lv)['time_to_target']['speedup_from_first_step']:.2f}x; reached "
             f"{auto_row(lv)['time_to_target']['reached']}/{lv['seeds']})" for lv in levels]
    return (f"digits behind the emulated store: `echo.factor: auto` reaches {levels[0]['target']:.3f} (a pilot's) "
            f"{' and '.join(cells)} as fast as e = 1 (wall time to target from the command's start, medians, "
            f"misses at the budget)")


def h_echo_text(rec: dict) -> str:
    g, auto = rec["goals"], auto_row(rec)["time_to_target"]
    return (f"`auto` reaches {rec['target_bits_per_byte']:.3f} bits per byte (a pilot's) "
            f"**{g['auto_speedup_vs_e1']:.2f}x** as fast as e = 1 from the command's start "
            f"({auto['speedup_from_first_step']:.2f}x from the first step; reached {auto['reached']}/{auto['runs']}) "
            f"and in {g['auto_time_over_best_fixed']:.2f}x the best fixed factor's time "
            f"(e = {g['best_fixed_factor']}); R {rec['R']:.1f}, {len(rec['scale']['auto_seeds'])} seeds")


def h_figure3(rec: dict) -> str:
    base = next(v for v in rec["variants"] if v["variant"] == "baseline")
    arms = [f"{v['label']} {mm(v['relative'])}" for v in rec["variants"] if v is not base]
    return (f"Fashion-MNIST, {rec['title'].split(': ', 1)[-1]}: fresh examples to target relative to the "
            f"baseline's {base['fresh_examples_to_target']['mean']:,.0f}: {', '.join(arms)}")


def h_figure5(rec: dict) -> str:
    return ("; ".join(w["statement"] for w in rec["worth"])
            + f" (target {rec['target_bits_per_byte']:.3f} bits per byte, medians over seeds, misses at the budget)")


def ms(d: dict) -> list[str]:
    return sorted(d, key=int)


def h_batch_augmentation(rec: dict) -> str:
    acc, views = rec["accuracy"]["ba"], rec["train_step_throughput"]["ba"]
    v = [views[m]["views_per_s"] for m in ms(views)]
    means = ", ".join(format(acc[m]["mean"], ".3f") for m in ms(acc))
    return (f"digits, {rec['provenance']['seeds']} seeds: held-out accuracy {means} for M = "
            f"{', '.join(ms(acc))}; views/s {min(v):,.0f} to {max(v):,.0f}")


def same_decoder(accel: dict) -> list[tuple[str, float, float]]:
    """(setting, echoray's e = 1 fresh images/s, the DataLoader's) per setting of the
    accelerator benchmark: the DataLoader there decodes and crops with echoray's own decoder
    (benchmarks/accelerator_dataloader.py), so only the pipelines differ."""
    rows = {(r["setting"], r["arm"]): r for r in accel["rows"] if r["workers"] == 1}
    return [(s, rows[(s, "e1")]["fresh_per_s"], rows[(s, "dataloader")]["fresh_per_s"])
            for s in dict.fromkeys(s for s, _ in rows) if (s, "e1") in rows and (s, "dataloader") in rows]


def h_input_pipeline(rec: dict, accel: dict) -> str:
    med = rec["epochs"]["median"]
    dl, ours = med["dataloader"], med["echoray"]
    same = " / ".join(f"{ours_s / dl_s:.2f}x" for _, ours_s, dl_s in same_decoder(accel))
    return (f"JPEGs (decode, random-resized crop, flip) against a torch DataLoader with torchvision's transform on the "
            f"same cores: steady state **{ours['steady_examples_per_s'] / dl['steady_examples_per_s']:.2f}x**, first "
            f"epoch with start-up {dl['first_epoch_s'] / ours['first_epoch_s']:.2f}x, first batch "
            f"{ours['first_batch_s']:.2f} s (medians of {rec['provenance']['repeats']}); against a DataLoader with "
            f"echoray's own decoder, feeding the emulated accelerator: **{same}** (R3 / R6)")


def t_same_decoder(accel: dict) -> list[str]:
    out = ["| accelerator setting | echoray, e = 1: fresh images/s | DataLoader, echoray's decoder | ratio |",
           "|---|---|---|---|"]
    for setting, ours, dl in same_decoder(accel):
        out.append(f"| {setting} | {ours:,.0f} | {dl:,.0f} | {ours / dl:.2f}x |")
    return out


def h_accelerator(rec: dict) -> str:
    return "accelerator busy fraction: " + ", ".join(f"{k} {v:.2f}" for k, v in rec["busy_fraction"].items())


PAGE_TITLES = {"docs/benchmarks/startup.md": "Start-up", "docs/benchmarks/echo.md": "Data echoing",
               "docs/how-to/language-models.md": "Language models", "docs/benchmarks/fashion-mnist.md": "Fashion-MNIST",
               "docs/benchmarks/batch-augmentation.md": "Batch augmentation",
               "docs/benchmarks/input-pipeline.md": "Input pipeline", "docs/benchmarks/index.md": "Benchmarks",
               "docs/benchmarks/accelerator.md": "An accelerator kept busy"}

HEADLINE = (
    ("start-up", ("startup.json",), h_startup, "docs/benchmarks/startup.md"),
    ("data echoing, images", ("echo_R4.json", "echo_R8.json"), h_echo_images, "docs/benchmarks/echo.md"),
    ("data echoing, text", ("lm_auto_echo.json",), h_echo_text, "docs/how-to/language-models.md"),
    ("Figure 3", ("fashion_mnist_figure3.json",), h_figure3, "docs/benchmarks/fashion-mnist.md"),
    ("Figure 5", ("lm_echo_figure5.json",), h_figure5, "docs/how-to/language-models.md"),
    ("batch augmentation", ("batch_augmentation.json",), h_batch_augmentation,
     "docs/benchmarks/batch-augmentation.md"),
    ("input pipeline", ("input_pipeline_epochs.json", "accelerator.json"), h_input_pipeline,
     "docs/benchmarks/input-pipeline.md"),
    ("accelerator busy", ("accelerator.json",), h_accelerator, "docs/benchmarks/accelerator.md"),
)


def headline(res: Results) -> list[str]:
    sha = f" `{res.commit}`" if res.commit else (
        ": none yet (no results file records a clean run with a foreign CPU share of at most 0.05)")
    out = [f"Figures at commit{sha}, written by `make bench-report` from the results files "
           "([how to read this table](docs/benchmarks/index.md)).", "",
           "| | figure | results file | page |", "|---|---|---|---|"]
    for label, files, extract, page in HEADLINE:
        refs = ", ".join(f"`benchmarks/results/{f}`" for f in files)
        link = f"[{PAGE_TITLES[page]}]({page})"
        out.append(f"| {label} | {quoted(res, files, extract)} | {refs} | {link} |")
    return out


# --- the benchmark pages' figure tables ------------------------------------------------------

def statuses(res: Results, files: tuple[str, ...]) -> list[str]:
    """The table a page shows while one of its files is not a figure."""
    return ["| results file | status |", "|---|---|",
            *(f"| `benchmarks/results/{f}` | {res.status(f)} |" for f in files)]


def t_startup(rec: dict) -> list[str]:
    auto, train = startup_arm(rec, "auto"), startup_arm(rec, "false")

    def cell(arm: dict, key: str, unit: str) -> str:
        return f"{arm[key]['median']:.1f} {unit} ({arm[key]['min']:.1f}-{arm[key]['max']:.1f})"

    rows = [("command start to exit (median, min-max)", "wall_s", "s"),
            ("command start to first training step", "time_to_first_step_s", "s"),
            ("command start to 97% held-out accuracy", "time_to_target_s", "s"),
            ("peak memory, all processes (PSS)", "peak_pss_gib", "GiB")]
    return ["| | in the CLI's process (default) | Ray Train worker group |", "|---|---|---|",
            *(f"| {label} | {cell(auto, k, u)} | {cell(train, k, u)} |" for label, k, u in rows)]


def t_echo(*levels: dict) -> list[str]:
    head = " | ".join(f"R ~ {lv['R']:.1f}" for lv in levels)
    out = [f"| e | {head} |", "|---" * (len(levels) + 1) + "|"]
    for factor in [r["factor"] for r in levels[0]["rows"]]:
        cells = []
        for lv in levels:
            t = next(r for r in lv["rows"] if r["factor"] == factor)["time_to_target"]
            cells.append(f"{t['median_from_start_s']:.1f} s, {t['speedup_from_start']:.2f}x "
                         f"({t['speedup_from_first_step']:.2f}x from the first step), reached {t['reached']}/{t['runs']}")
        out.append(f"| {factor} | {' | '.join(cells)} |")
    return out


def t_batch_augmentation(rec: dict) -> list[str]:
    acc, speed = rec["accuracy"], rec["train_step_throughput"]["ba"]
    out = ["| M | batch augmentation | baseline of batch M x B | samples/s | views/s |", "|---|---|---|---|---|"]
    for m in ms(acc["ba"]):
        base = mm(acc["baseline"][m], "{:.3f}") if m in acc.get("baseline", {}) else "(the same run)"
        out.append(f"| {m} | {mm(acc['ba'][m], '{:.3f}')} | {base} | {speed[m]['samples_per_s']:,.0f} | "
                   f"{speed[m]['views_per_s']:,.0f} |")
    return out


def t_figure3(rec: dict) -> list[str]:
    out = ["| arm | fresh examples to target | relative to the baseline | 1/e |", "|---|---|---|---|"]
    for v in rec["variants"]:
        out.append(f"| {v['label']} | {mm(v['fresh_examples_to_target'], '{:,.0f}')} | {mm(v['relative'])} | "
                   f"{1 / v['factor']:g} |")
    return out


def t_figure5(rec: dict) -> list[str]:
    """Fresh tokens to target per e and batch size: median [min, max] over the seeds (a miss
    at its budget), how many reached it, and a repeated token's worth against a fresh one."""
    sizes = [w["batch_size"] for w in rec["worth"]]
    points = {(pt["batch_size"], pt["factor"]): pt for pt in rec["points"]}
    worth = {(w["batch_size"], x["factor"]): x for w in rec["worth"] for x in w["worth"]}
    out = ["| e | " + " | ".join(f"batch {b}: fresh tokens (reached) | worth" for b in sizes) + " |",
           "|---" * (2 * len(sizes) + 1) + "|"]
    for e in dict.fromkeys(pt["factor"] for pt in rec["points"]):
        cells = []
        for b in sizes:
            pt, w = points[(b, e)], worth.get((b, e), {})
            val = w.get("worth") if w.get("worth") is not None else w.get("worth_at_most")
            cells += [f"{pt['median']:,.0f} [{pt['min']:,.0f}, {pt['max']:,.0f}] ({pt['reached']}/{pt['seeds']})",
                      "" if val is None else f"{'<= ' if w.get('worth') is None else ''}{val:.2f}"]
        out.append(f"| {e} | {' | '.join(cells)} |")
    return out


def t_text_pipeline(rec: dict) -> list[str]:
    """Per tokenizer: sequences/s of the DataLoader and of echoray, steady (the second half
    after the first batch) and from the first batch to the last, the per-repeat ratios'
    medians, and the first batch's time."""
    out = ["| tokenizer | rate | DataLoader, 2 workers | echoray, 2 actors of 1 CPU | echoray / DataLoader (median) |",
           "|---|---|---|---|---|"]
    for tok in ("bytes", "bpe"):
        runs = rec[tok]["runs"]
        for label, key in (("steady", "examples_per_s"), ("first batch to last", "after_first_batch_examples_per_s")):
            dl, ours = [r[key] for r in runs["dataloader"]], [r[key] for r in runs["echoray"]]
            ratio = statistics.median(o / d for o, d in zip(ours, dl, strict=True))
            out.append(f"| {tok} | {label} | {min(dl):,.0f}-{max(dl):,.0f} | {min(ours):,.0f}-{max(ours):,.0f} | "
                       f"**{ratio:.2f}x** |")
        first = {arm: statistics.median(r["first_batch_s"] for r in rs) for arm, rs in runs.items()}
        out.append(f"| {tok} | first batch | {first['dataloader']:.2f} s | {first['echoray']:.2f} s | |")
    return out


def t_search(rec: dict) -> list[str]:
    runs = sorted(rec["echoray"], key=lambda r: -r["concurrency"])
    out = ["| | " + " | ".join(f"concurrency {r['concurrency']}" for r in runs) + " |", "|---" * (len(runs) + 1) + "|"]
    out.append("| overhead per trial, mean | " + " | ".join(f"{r['overhead_per_trial_s']:.1f} s" for r in runs) + " |")
    out.append("| search wall time | " + " | ".join(f"{r['tune_wall_s']:.1f} s" for r in runs) + " |")
    return out


def t_input_pipeline(rec: dict) -> list[str]:
    med = rec["epochs"]["median"]
    dl = med["dataloader"]
    out = ["| arm | first batch | first epoch, start-up included | steady state, images/s | images per CPU-second |",
           "|---|---|---|---|---|"]
    for arm, m in med.items():
        out.append(f"| {arm} | {m['first_batch_s']:.2f} s | {m['first_epoch_s']:.2f} s "
                   f"({dl['first_epoch_s'] / m['first_epoch_s']:.2f}x) | {m['steady_examples_per_s']:,.0f} "
                   f"({m['steady_examples_per_s'] / dl['steady_examples_per_s']:.2f}x) | {m['images_per_cpu_s']:,.0f} |")
    return out


def t_accelerator(rec: dict) -> list[str]:
    """Busy fraction per arm and setting (trained / fresh examples per second, the measured
    factor), then issue 60's goals per `auto` arm."""
    rows = {(r["setting"], r["workers"], r["arm"]): r for r in rec["rows"]}
    cols = list(dict.fromkeys((r["setting"], r["workers"], r["R"]) for r in rec["rows"]))
    out = ["| arm: busy (trained / fresh examples per s, measured e) | " + " | ".join(f"{s} (measured R {big_r:.1f}), {w} worker(s)" for s, w, big_r in cols) + " |",
           "|---" * (len(cols) + 1) + "|"]
    for arm in dict.fromkeys(r["arm"] for r in rec["rows"]):
        cells = []
        for s, w, _ in cols:
            r = rows.get((s, w, arm))
            cells.append("" if r is None else f"**{r['busy']:.2f}** ({r['trained_per_s']:,.0f} / "
                         f"{r['fresh_per_s']:,.0f} per s, e {r['measured_factor']:.1f})")
        out.append(f"| {arm} | {' | '.join(cells)} |")
    out += ["", "| `auto` arm | busy >= 0.9 | within 10% of the best fixed factor's busy |", "|---|---|---|"]
    for g in rec["goals"]:
        out.append(f"| {g['setting']}, {g['workers']} worker(s), {g['arm']} | {g['busy']:.2f}: "
                   f"{'met' if g['busy_ge_0_9'] else 'not met'} | best fixed {g['best_fixed_busy']:.2f}: "
                   f"{'met' if g['within_10pct_of_best'] else 'not met'} |")
    return out


TTT_GOAL = {"R3": 2.0, "R6": 3.25}  # issue 60: auto's time to target against e = 1's


def t_accelerator_ttt(rec: dict) -> list[str]:
    """Time to target with the learning accelerator, per setting and arm: how many repeats
    reached it, the median with misses at their run's end, the speed-up over e = 1, the
    final held-out accuracy (median)."""
    acc: dict[tuple, list[float]] = {}
    for run in rec["runs"]:
        acc.setdefault((run["setting"], run["arm"]), []).append(run["accuracy"])
    out = ["| setting | arm | reached | time to target, median (a miss at its run's end) | from the first step | "
           "vs e = 1 | final accuracy | goal |", "|---|---|---|---|---|---|---|---|"]
    rows = [r for r in rec["rows"] if r["arm"] != "dataloader"]
    for r in rows:
        e1 = next(b for b in rows if (b["setting"], b["workers"], b["arm"]) == (r["setting"], r["workers"], "e1"))
        speedup = e1["time_to_target_median_s"] / r["time_to_target_median_s"]
        goal = TTT_GOAL.get(r["setting"]) if r["arm"].endswith("_auto") else None
        verdict = "" if goal is None else f">= {goal:g}x: {'met' if speedup >= goal and r['reached'] else 'not met'}"
        out.append(f"| {r['setting']} | {r['arm']} | {r['reached']}/{r['repeats']} | "
                   f"{r['time_to_target_median_s']:.1f} s | {ttt_from_first_step(r)} | {speedup:.2f}x | "
                   f"{statistics.median(acc[(r['setting'], r['arm'])]):.2f} | {verdict} |")
    target = rec.get("target", rec["provenance"]["args"]["target"])
    pilot = rec.get("pilot")
    if pilot:
        out += ["", f"Target {target:.2f} held-out accuracy, fixed before the measured runs by a pilot: e = 1, "
                f"seed {pilot['seed']}, {pilot['setting']}, its evaluation {pilot['at_evaluation']} of {pilot['of']} "
                f"(70% of its budget)."]
    if not any(r["reached"] for r in rows):
        out += ["", f"No run reached the target ({target}): each time is its run's end, not a time to target."]
    return out


def ttt_from_first_step(row: dict) -> str:
    t = row.get("from_first_step_median_s")
    return "" if t is None else f"{t:.1f} s"


def _table(files: tuple[str, ...], extract, quotable, intro):
    """A page table: extract(*records) under intro(res, records) when every file is
    quotable(res, name) (a Results method), else the files' statuses."""
    def render(res: Results) -> list[str]:
        if any(quotable(res, f) is None for f in files):
            return statuses(res, files)
        recs = [res.records[f] for f in files]
        try:
            rows = extract(*recs)
        except EXTRACT_ERRORS as exc:
            return statuses(res, files) + [f"| (all) | not a figure (its results file lacks {exc!s}) |"]
        refs = ", ".join(f"`benchmarks/results/{f}`" for f in files)
        return [f"{intro(res, recs)}, from {refs}:", "", *rows]
    return render


def page_table(files: tuple[str, ...], extract):
    """A table of make bench's figures, at the report's commit."""
    return _table(files, extract, Results.figure, lambda res, recs: f"At commit `{res.commit[:7]}`")


def record_table(files: tuple[str, ...], extract):
    """A table of by-hand records (files no make bench part writes): quoted from a clean and
    quiet run at its own commit, which the table names, never as the report's figures."""
    def intro(res: Results, recs: list[dict]) -> str:
        commits = ", ".join(dict.fromkeys(f"`{r['provenance']['commit'][:7]}`" for r in recs))
        return f"A record at commit {commits} (run by hand, not in `make bench`)"
    return _table(files, extract, Results.record, intro)


def t_loop_profile(*recs: dict) -> list[str]:
    """Per setting, worker count and arm (over the files given): the accelerator's busy
    fraction and where rank 0's loop spent its time (medians over the repeats;
    accelerator.loop_profile)."""
    out = ["| setting | workers | arm | busy | loop: in steps | waiting for input | evaluations | the rest |",
           "|---|---|---|---|---|---|---|---|"]
    for r in (row for rec in recs for row in rec["rows"]):
        if "loop_step_share" in r:
            out.append(f"| {r['setting']} | {r['workers']} | {r['arm']} | {r['busy']:.2f} | "
                       f"{r['loop_step_share']:.2f} | {r['loop_input_wait_share']:.2f} | "
                       f"{r['loop_eval_share']:.2f} | {r['loop_other_share']:.2f} |")
    return out


def parts_table(res: Results) -> list[str]:
    out = ["| part | command | minutes (quick) | results file: status |", "|---|---|---|---|"]
    for p in plist.PARTS:
        cmd = "; ".join(f"`{' '.join(c)}`" for c in p.command) + (f" (scaled: {p.scaled})" if p.scaled else "")
        files = "; ".join(f"`benchmarks/results/{f}`: {res.status(f)}" for f in p.results)
        out.append(f"| `{p.name}` | {cmd} | {p.minutes:g} ({p.quick_minutes:g}) | {files} |")
    total = sum(p.minutes for p in plist.PARTS)
    quick = sum(p.quick_minutes for p in plist.PARTS)
    out.append(f"| all | `make bench` | {total:g} ({quick:g}) | |")
    return out


def files_table(res: Results) -> list[str]:
    out = ["| results file | written by a `make bench` part | status |", "|---|---|---|"]
    for f in sorted(res.records):
        if res.records[f] is not None:
            part = plist.part_of(f)
            out.append(f"| `benchmarks/results/{f}` | {part.name if part else 'no'} | {res.status(f)} |")
    return out


TABLES = {
    "README.md": {"headline": headline},
    "docs/benchmarks/index.md": {"parts": parts_table, "files": files_table},
    "docs/benchmarks/startup.md": {"startup": page_table(("startup.json",), t_startup)},
    "docs/benchmarks/echo.md": {"echo": page_table(("echo_R4.json", "echo_R8.json"), t_echo)},
    "docs/benchmarks/batch-augmentation.md": {
        "batch-augmentation": page_table(("batch_augmentation.json",), t_batch_augmentation)},
    "docs/benchmarks/fashion-mnist.md": {"figure3": page_table(("fashion_mnist_figure3.json",), t_figure3)},
    "docs/how-to/language-models.md": {"figure5": page_table(("lm_echo_figure5.json",), t_figure5),
                                       "echo-text": page_table(("lm_auto_echo.json",), t_echo),
                                       "text-pipeline": page_table(("text_pipeline.json",), t_text_pipeline)},
    "docs/benchmarks/search.md": {"search": page_table(("tune_overhead.json",), t_search)},
    "docs/benchmarks/input-pipeline.md": {
        "input-pipeline": page_table(("input_pipeline_epochs.json",), t_input_pipeline),
        "same-decoder": page_table(("accelerator.json",), t_same_decoder)},
    "docs/benchmarks/accelerator.md": {"accelerator": page_table(("accelerator.json",), t_accelerator),
                                       "accelerator-ttt": page_table(("accelerator_ttt.json",), t_accelerator_ttt),
                                       "accelerator-workers": page_table(("accelerator_workers.json",), t_accelerator),
                                       "accelerator-loop": page_table(("accelerator.json", "accelerator_workers.json"),
                                                                      t_loop_profile)},
}


def replace_between(text: str, name: str, lines: list[str], where: str = "") -> str:
    """`text` with the lines between NAME's markers replaced by `lines`."""
    pat = re.compile(rf"(<!-- bench-report:{re.escape(name)} -->\n)(.*?)(<!-- /bench-report:{re.escape(name)} -->)",
                     re.S)
    if len(pat.findall(text)) != 1:
        raise ValueError(f"{where}: expected one pair of <!-- bench-report:{name} --> markers")
    return pat.sub(lambda m: m[1] + "\n".join(lines) + "\n" + m[3], text)


def render(repo: Path = REPO) -> dict[Path, str]:
    """Every file with tables, as the report writes it."""
    names = [f for p in plist.PARTS for f in p.results] + [f for _, fs, _, _ in HEADLINE for f in fs]
    res = load(repo / "benchmarks" / "results", names)
    out = {}
    for rel, tables in TABLES.items():
        path = repo / rel
        text = path.read_text()
        for name, make in tables.items():
            text = replace_between(text, name, make(res), rel)
        out[path] = text
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    ap.add_argument("--repo", type=Path, default=REPO)
    a = ap.parse_args(argv)
    try:
        rendered = render(a.repo)
    except (ValueError, OSError) as exc:
        print(f"bench-report: {exc}", file=sys.stderr)
        return 2
    changed = [p for p, text in rendered.items() if p.read_text() != text]
    for p in changed:
        rel = p.relative_to(a.repo)
        if a.check:
            print(f"bench-report: {rel} differs from its results files (run make bench-report)", file=sys.stderr)
        else:
            p.write_text(rendered[p])
            print(f"bench-report: wrote {rel}")
    return 1 if a.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
