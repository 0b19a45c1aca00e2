"""Check the figures the docs quote against the results files they name.

Convention: every figure quoted in README.md or docs/**/*.md names its results file as a
path `benchmarks/results/NAME.json` in the same paragraph or table. This script finds every
such path in those files and reports, one line each (doc file, line, results file, load):

- a results file that does not exist (any extension: .json, .png, .log);
- a .json results file that records no load average at the start and at the end of its
  run (the recorded form, written by benchmarks/common.py's `save`, is a top-level
  `"load_avg": {"start": x, "end": y}`, 1-minute load averages; the forms written before
  it are read too, see LEGACY);
- a .json results file whose recorded load is above MAX_LOAD at the start or the end (on
  this project's 2-core machine a load above 3 means other work competed for the cores
  during the measurement, so its figures are not this code's);
- a paragraph or table that quotes a measured figure (a number with a unit: s, ms, min,
  GiB, MiB, %, x, ex/s, ...) and says it was measured (the word "measured", a benchmark
  script `benchmarks/NAME.py`, or "load average") but names no results file; or one that
  names a results file without its path (`echo_R4.json` for
  `benchmarks/results/echo_R4.json`).

A results file recorded under load may still be named where the docs say it **awaits a
quiet rerun** (those words in the table row, or in the paragraph, that names it): its load
is then not an offence, but a measured figure quoted in that row or paragraph is.

`{a,b}` in a path is expanded as the shell does (`startup_timeline_{x,y}.json`); `*` is a glob.

    python benchmarks/check_figures.py          # exit 1 and one line per offence
    python benchmarks/check_figures.py --max-load 3

Run by tests/unit/test_figures.py.
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_LOAD = 3.0
PENDING = re.compile(r"awaits?\s+a\s+quiet\s+rerun")
REF = re.compile(r"benchmarks/results/[A-Za-z0-9_.*{},\-]+\.(?:json|png|log)")
BARE = re.compile(r"(?<![/\w])([A-Za-z0-9_\-]+\.json)\b")
FIGURE = re.compile(r"\d(?:[\d,]*\d)?(?:\.\d+)?(?:x\b|\s?%|\s?(?:s|ms|min|h|GiB|MiB|KiB|GB|MB|ex/s|examples/s|steps/s)\b)")
MEASURED = re.compile(r"[Mm]easured|benchmarks/\w+\.py|load average")
# Top-level (start, end) key pairs of the results files written before load_avg, each a
# 1/5/15-minute triple or a number; their 1-minute value is the load.
LEGACY = [("loadavg_before", "loadavg_after"), ("load_average_before", "load_average_after"),
          ("load_avg_start", "load_avg_end")]
ONE_POINT = ("load_average", "load_average_at_end", "load_average_1_5_15")  # a single reading


@dataclass(frozen=True)
class Offence:
    doc: str  # relative to the repository
    line: int
    results: str
    problem: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.results}: {self.problem}"


def one_minute(v) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, (list, tuple)) and v and isinstance(v[0], (int, float)):
        return float(v[0])
    return None


def recorded_loads(record) -> tuple[list[tuple[str, float | None, float | None]], str | None]:
    """[(where, start, end)] for every recorded pair in the file, or ([], why none): the
    top level's and any part's own (a `load_avg` dict anywhere, e.g. each level of
    echo.json, each part of input_pipeline.json; the LEGACY pairs likewise)."""
    if not isinstance(record, dict):
        return [], "not a JSON object"
    pairs: list[tuple[str, float | None, float | None]] = []

    def walk(o, where: str) -> None:
        if isinstance(o, dict):
            la = o.get("load_avg")
            if isinstance(la, dict) and "start" in la and "end" in la:
                pairs.append((f"{where}load_avg", one_minute(la["start"]), one_minute(la["end"])))
            for a, b in LEGACY:
                if a in o and b in o:
                    pairs.append((f"{where}{a}/{b}", one_minute(o[a]), one_minute(o[b])))
            for k, v in o.items():
                if k != "load_avg":
                    walk(v, f"{where}{k}.")
        elif isinstance(o, list):
            for i, v in enumerate(o):
                walk(v, f"{where.rstrip('.')}[{i}].")

    walk(record, "")
    if pairs:
        return pairs, None
    single = [k for k in ONE_POINT if k in record]
    if single:
        return [], f"records one load average ({single[0]}: {one_minute(record[single[0]]):.2f}), not one at start and end"
    return [], "records no load average at start and end"


def check_results(path: Path, max_load: float) -> list[str]:
    """The problems of one results file (empty: fine)."""
    if not path.exists():
        return ["does not exist"]
    if path.suffix != ".json":
        return []
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        return [f"not JSON ({exc})"]
    pairs, why = recorded_loads(record)
    if why:
        return [why]
    out = []
    for where, start, end in pairs:
        if start is None or end is None:
            out.append(f"{where}: no load at the {'start' if start is None else 'end'}")
        elif max(start, end) > max_load:
            out.append(f"load {start:.2f} at start, {end:.2f} at end ({where}): above {max_load:g}")
    return out


def expand(ref: str) -> list[str]:
    """`a_{x,y}.json` -> [a_x.json, a_y.json] (one level of braces, as the docs use them)."""
    m = re.search(r"\{([^{}]*)\}", ref)
    if not m:
        return [ref]
    return [x for alt in m[1].split(",") for x in expand(ref[:m.start()] + alt + ref[m.end():])]


def blocks(text: str) -> list[tuple[int, list[str]]]:
    """Paragraphs and tables: (first line number, lines), split at blank lines; a fenced
    code block is kept whole with the text around it."""
    out, cur, start, fenced = [], [], 1, False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not line.strip() and not fenced:
            if cur:
                out.append((start, cur))
            cur, start = [], n + 1
            continue
        cur.append(line)
    if cur:
        out.append((start, cur))
    return out


def unreferenced(repo: Path, doc: Path, max_load: float = MAX_LOAD) -> list[Offence]:
    """Measured figures in a block that names no results file, and results files named
    without their path, those checked too (see the module docstring)."""
    out = []
    results = {p.name for p in (repo / "benchmarks" / "results").glob("*.json")}
    for start, lines in blocks(doc.read_text()):
        text = "\n".join(lines)
        without_paths = REF.sub("", text)
        for k, line in enumerate(lines):
            for name in BARE.findall(REF.sub("", line)):
                if name in results:
                    out.append(Offence(str(doc.relative_to(repo)), start + k, name,
                                       f"named without its path: write benchmarks/results/{name}"))
                    out += [Offence(str(doc.relative_to(repo)), start + k, f"benchmarks/results/{name}", problem)
                            for problem in check_results(repo / "benchmarks" / "results" / name, max_load)]
        if any(r.endswith(".json") for r in REF.findall(text)) or not MEASURED.search(text):
            continue
        figure = FIGURE.search(without_paths)
        if figure:
            k = next(i for i, ln in enumerate(lines) if FIGURE.search(ln))
            out.append(Offence(str(doc.relative_to(repo)), start + k, "(none)",
                               f"measured figure {figure[0]!r} with no benchmarks/results/NAME.json in its paragraph"))
    return out


def docs(repo: Path) -> list[Path]:
    return sorted([p for p in [repo / "README.md"] if p.exists()] + list((repo / "docs").glob("**/*.md")))


def is_load_problem(problem: str) -> bool:
    """What check_results says about a file's recorded load (not: missing, not JSON)."""
    return problem != "does not exist" and not problem.startswith("not JSON")


def pending_lines(text: str) -> dict[int, str]:
    """Line number -> the row or paragraph it belongs to, for the lines whose row (a table
    line) or paragraph says the results it names await a quiet rerun."""
    out = {}
    for start, lines in blocks(text):
        paragraph = "\n".join(lines)
        for k, line in enumerate(lines):
            scope = line if line.lstrip().startswith("|") else paragraph
            if PENDING.search(scope):
                out[start + k] = scope
    return out


def check(repo: Path = REPO, max_load: float = MAX_LOAD) -> list[Offence]:
    offences, seen = [], {}
    for doc in docs(repo):
        text = doc.read_text()
        pending = pending_lines(text)
        for n, line in enumerate(text.splitlines(), 1):
            if n in pending and (figure := FIGURE.search(REF.sub("", pending[n]))):
                offences.append(Offence(str(doc.relative_to(repo)), n, "(pending)",
                                        f"quotes {figure[0]!r} beside results that await a quiet rerun"))
            for ref in (r for found in REF.findall(line) for r in expand(found)):
                paths = [Path(p) for p in sorted(glob.glob(str(repo / ref)))] if "*" in ref else [repo / ref]
                if not paths:
                    offences.append(Offence(str(doc.relative_to(repo)), n, ref, "matches no file"))
                for p in paths:
                    rel = str(p.relative_to(repo))
                    if rel not in seen:
                        seen[rel] = check_results(p, max_load)
                    offences += [Offence(str(doc.relative_to(repo)), n, rel, problem) for problem in seen[rel]
                                 if n not in pending or not is_load_problem(problem)]
        offences += unreferenced(repo, doc, max_load)
    return sorted(offences, key=lambda o: (o.doc, o.line, o.results, o.problem))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=REPO)
    ap.add_argument("--max-load", type=float, default=MAX_LOAD)
    args = ap.parse_args(argv)
    offences = check(args.repo, args.max_load)
    for o in offences:
        print(o)
    print(f"{len(offences)} offence(s)" if offences else "figures check: ok",
          file=sys.stderr)
    return 1 if offences else 0


if __name__ == "__main__":
    sys.exit(main())
