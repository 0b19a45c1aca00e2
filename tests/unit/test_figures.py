"""The figures the docs quote name results files that exist and were recorded on a quiet
machine (benchmarks/check_figures.py), and every benchmark writes the recorded form the
check reads (benchmarks/common.py's `save`)."""

from __future__ import annotations

import json
import re

import pytest

from helpers import REPO, load_benchmark

BENCH = REPO / "benchmarks"

cf = load_benchmark("check_figures")


def test_every_figure_in_the_docs_names_an_existing_results_file_recorded_at_low_load():
    offences = cf.check(REPO)
    assert not offences, (f"{len(offences)} offence(s) (python benchmarks/check_figures.py):\n"
                          + "\n".join(map(str, offences)))


def write(root, files: dict[str, object]) -> None:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content if isinstance(content, str) else json.dumps(content))


QUIET = {"load_avg": {"start": 0.5, "end": 1.2}}


def test_the_check_reports_each_offence_with_doc_line_file_and_load(tmp_path):
    write(tmp_path, {
        "README.md": "# t\n\nMeasured: 12.5 s to first step (`benchmarks/results/ok.json`).\n\n"
                     "Measured: 3.1 GiB (`benchmarks/results/missing.json`).\n\n"
                     "| figure | value |\n|---|---|\n| wall | 9.0 s, benchmarks/results/loaded.json |\n\n"
                     "Measured by `benchmarks/x.py`: 40 ex/s, no results file named here.\n\n"
                     "Also in `ok.json` and benchmarks/results/t_{ok,one}.json.\n",
        "docs/guide/more.md": "Measured: 2 min (benchmarks/results/none.json)\n",
        "benchmarks/results/ok.json": QUIET,
        "benchmarks/results/t_ok.json": {"loadavg_before": [1.0, 2, 3], "loadavg_after": [2.9, 2, 3]},
        "benchmarks/results/t_one.json": {"load_average": [0.1, 0.2, 0.3]},
        "benchmarks/results/loaded.json": {"levels": [{"load_avg": {"start": 0.1, "end": 0.2}},
                                                      {"load_avg": {"start": 2.0, "end": 3.5}}]},
        "benchmarks/results/none.json": {"x": 1},
    })
    got = [(o.doc, o.line, o.results, o.problem) for o in cf.check(tmp_path)]
    assert got == [
        ("README.md", 5, "benchmarks/results/missing.json", "does not exist"),
        ("README.md", 9, "benchmarks/results/loaded.json",
         "load 2.00 at start, 3.50 at end (levels[1].load_avg): above 3"),
        ("README.md", 11, "(none)",
         "measured figure '40 ex/s' with no benchmarks/results/NAME.json in its paragraph"),
        ("README.md", 13, "benchmarks/results/t_one.json",
         "records one load average (load_average: 0.10), not one at start and end"),
        ("README.md", 13, "ok.json", "named without its path: write benchmarks/results/ok.json"),
        ("docs/guide/more.md", 1, "benchmarks/results/none.json", "records no load average at start and end"),
    ]
    assert cf.main(["--repo", str(tmp_path)]) == 1
    assert [o.problem for o in cf.check(tmp_path, max_load=4) if o.results.endswith("loaded.json")] == []


def test_a_clean_tree_passes(tmp_path, capsys):
    write(tmp_path, {"README.md": "Measured: 1.5 s (benchmarks/results/ok.json)\n\n```\nmake test\n```\n",
                     "benchmarks/results/ok.json": QUIET})
    assert cf.check(tmp_path) == [] and cf.main(["--repo", str(tmp_path)]) == 0
    assert "figures check: ok" in capsys.readouterr().err


def test_save_writes_the_recorded_form(tmp_path, monkeypatch):
    import argparse

    common = load_benchmark("common")
    monkeypatch.setattr(common.os, "getloadavg", lambda: (0.25, 0.5, 0.75))
    args = argparse.Namespace(seeds=3, repeats=2, other="x")
    path = common.save("x", {"figure": 1.0}, args, start_load=(0.1, 0.2, 0.3), path=tmp_path / "x.json")
    rec = json.loads(path.read_text())
    assert rec["figure"] == 1.0
    assert rec["load_avg"] == {"start": 0.1, "end": 0.25, "start_1_5_15": [0.1, 0.2, 0.3],
                               "end_1_5_15": [0.25, 0.5, 0.75]}
    prov = rec["provenance"]
    assert re.fullmatch(r"[0-9a-f]{40}", prov["commit"]) and isinstance(prov["dirty"], bool)
    assert (prov["seeds"], prov["repeats"], prov["args"]) == (3, 2, {"seeds": 3, "repeats": 2, "other": "x"})
    assert cf.check_results(path, cf.MAX_LOAD) == []


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.py")
                                          if p.name not in ("common.py", "check_figures.py")))
def test_every_benchmark_writes_results_through_save(script):
    """A script that writes a results JSON does it with common.save (the recorded load and
    commit), and none reads its reported runs from elsewhere (a cache or an earlier file)."""
    src = (BENCH / script).read_text()
    writes = re.findall(r"RESULTS\s*/\s*[^\n]*\.json[^\n]*\)\.write_text|write_text\(json\.dumps", src)
    # startup_timeline's child writes its trace to a temp file for the parent, not a result
    assert [w for w in writes if script != "startup_timeline.py"] == [], writes
    if re.search(r"\bsave\(", src) is None:
        assert "results" not in re.sub(r"benchmarks/results/\S+\.(png|json)", "", src).split('"""', 2)[-1], script
    for flag in ("--runs-file", "--baseline-from", "--runs-from"):
        assert flag not in src, (script, flag)


def test_a_loaded_file_may_be_named_only_where_the_docs_say_it_awaits_a_rerun(tmp_path):
    """A row or paragraph that says its results await a quiet rerun may name a loaded file,
    but quotes no measured figure from it; a file that does not exist is still an offence."""
    loaded = {"load_avg": {"start": 20.0, "end": 40.0}}
    write(tmp_path, {
        "README.md": "`benchmarks/results/loaded.json` (load 20-40) awaits a\nquiet rerun.\n\n"
                     "| file | status |\n|---|---|\n| `benchmarks/results/loaded.json` | awaits a quiet rerun |\n"
                     "| `benchmarks/results/loaded.json` | quoted |\n\n"
                     "Measured 12.5 s (`benchmarks/results/loaded.json`), awaits a quiet rerun.\n\n"
                     "`benchmarks/results/gone.json` awaits a quiet rerun.\n",
        "benchmarks/results/loaded.json": loaded,
    })
    got = [(o.line, o.results, o.problem) for o in cf.check(tmp_path)]
    assert got == [
        (7, "benchmarks/results/loaded.json", "load 20.00 at start, 40.00 at end (load_avg): above 3"),
        (9, "(pending)", "quotes '12.5 s' beside results that await a quiet rerun"),
        (11, "benchmarks/results/gone.json", "does not exist"),
    ]
