"""`make bench-report` (benchmarks/report.py): the committed README and benchmark pages are
exactly what the report writes from the committed results files; a results file is quoted
only with a clean, quiet provenance of the report's commit; the part list fits its budget."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import REPO, load_benchmark

report = load_benchmark("report")
parts = load_benchmark("parts")
C = "c" * 40


def test_the_committed_tables_are_what_the_report_writes():
    """A quoted figure cannot differ from its file: run `make bench-report` and commit."""
    stale = [str(p.relative_to(REPO)) for p, text in report.render(REPO).items() if p.read_text() != text]
    assert stale == [], f"run `make bench-report`: {stale}"
    assert report.main(["--check"]) == 0


def quiet(commit: str = C, ended: str = "2027-01-01T10:00:00Z", **over) -> dict:
    return {"commit": commit, "clean": True, "seeds": [0], "repeats": 3, "started": "2027-01-01T09:00:00Z",
            "ended": ended, "cpus": 2, "foreign_cpu_share": 0.01, **over}


# the headline's files, copies of committed runs of the same scripts (their schema, at
# e6d873b; tests/unit/data/bench/, so that a new `make bench` does not change what these
# tests assert), given a provenance; Figure 5's (benchmarks/ttt.py's rules) from a smoke run
# of its script (lm.py --smoke --part figure5)
SMOKE = REPO / "tests" / "unit" / "data" / "bench"
SOURCES = {name: SMOKE / name for name in (
    "startup.json", "echo_R4.json", "echo_R8.json", "lm_auto_echo.json", "fashion_mnist_figure3.json",
    "lm_echo_figure5.json", "batch_augmentation.json", "tune_overhead.json", "accelerator.json",
    "accelerator_ttt.json")}
SOURCES["input_pipeline_epochs.json"] = SMOKE / "input_pipeline_quiet_pool_at.json"


@pytest.fixture
def repo(tmp_path):
    for rel in report.TABLES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    for name, src in SOURCES.items():
        rec = json.loads(src.read_text())
        prov = quiet(args=rec.get("provenance", {}).get("args", {}))
        (results / name).write_text(json.dumps({**rec, "provenance": prov}))
    return tmp_path


def rows(text: str) -> dict[str, str]:
    """The README headline table: label -> figure cell."""
    block = text.split("<!-- bench-report:headline -->")[1].split("<!-- /bench-report:headline -->")[0]
    return {c[1].strip(): c[2].strip() for c in (ln.split("|") for ln in block.splitlines()[5:])}


def test_quiet_files_of_one_commit_are_quoted_with_their_numbers(repo):
    assert report.main(["--repo", str(repo)]) == 0
    readme = (repo / "README.md").read_text()
    assert f"Figures at commit `{C}`" in readme
    got = rows(readme)
    assert len(got) <= 10
    assert got["start-up"] == ("the default run: **15.4 s** from command to exit, first training step at 8.6 s "
                               "(medians of 3)")
    assert got["data echoing, images"] == (
        "digits behind the emulated store: `echo.factor: auto` reaches 0.950 (a pilot's) **0.93x** at R ~ 4.7 "
        "(from the first step 0.79x; reached 3/3) and **1.09x** at R ~ 8.9 (from the first step 1.18x; reached 3/3) "
        "as fast as e = 1 (wall time to target from the command's start, medians, misses at the budget)")
    assert got["data echoing, text"] == ("`auto` reaches 3.972 bits per byte (a pilot's) **1.07x** as fast as e = 1 "
                                         "from the command's start (1.09x from the first step; reached 5/5) and in "
                                         "1.09x the best fixed factor's time (e = 8); R 4.9, 5 seeds")
    assert got["Figure 5"].endswith("(reached: e = 1 1/1, e = 4 1/1) (target 4.613 bits per byte, medians over "
                                    "seeds, misses at the budget)")
    echo_page = (repo / "docs/benchmarks/echo.md").read_text()
    assert ("| auto | 19.5 s, 0.93x (0.79x from the first step), reached 3/3 | 21.2 s, 1.09x (1.18x from the "
            "first step), reached 3/3 |") in echo_page
    assert "first batch 0.56 s (medians of 3)" in got["input pipeline"]
    assert got["input pipeline"].endswith("echoray's own decoder, feeding the emulated accelerator: **1.25x / 1.28x** "
                                          "(R3 / R6)")
    assert "| R3 | 782 | 627 | 1.25x |" in (repo / "docs/benchmarks/input-pipeline.md").read_text()
    assert got["accelerator busy"].startswith("accelerator busy fraction: R3 e1 0.32, R3 after_augment_auto 0.54, ")
    assert all("not a figure" not in v and v != "no results yet" for v in got.values()), got
    accel = (repo / "docs/benchmarks/accelerator.md").read_text()
    assert "| batch_auto | **0.95** (2,351 / 593 per s, e 4.0) | **0.93** (4,584 / 623 per s, e 7.4) |" in accel
    assert "| R6, 1 worker(s), batch_auto | 0.93: met | best fixed 0.62: met |" in accel
    assert "| R3 | batch_auto | 3/3 | 32.1 s | 19.7 s | 0.64x | 0.49 | >= 2x: not met |" in accel
    assert "Target 0.48 held-out accuracy, fixed before the measured runs by a pilot: e = 1, seed 100, R3, " in accel
    startup = (repo / "docs/benchmarks/startup.md").read_text()
    assert f"At commit `{C[:7]}`, from `benchmarks/results/startup.json`:" in startup
    assert "| command start to exit (median, min-max) | 15.4 s (15.2-15.6) | 28.6 s (28.4-29.3) |" in startup
    search = (repo / "docs/benchmarks/search.md").read_text()
    assert "| overhead per trial, mean | 4.4 s | 3.0 s |" in search
    assert report.main(["--repo", str(repo), "--check"]) == 0  # written once, stable


def set_prov(repo, name: str, **over) -> None:
    p = repo / "benchmarks" / "results" / name
    rec = json.loads(p.read_text())
    rec["provenance"].update(over)
    p.write_text(json.dumps(rec))


def test_a_loaded_dirty_old_or_broken_file_is_not_a_figure(repo):
    set_prov(repo, "startup.json", foreign_cpu_share=0.2)
    set_prov(repo, "batch_augmentation.json", clean=False)
    set_prov(repo, "lm_echo_figure5.json", commit="d" * 40, ended="2026-12-31T00:00:00Z")
    p = repo / "benchmarks" / "results" / "lm_auto_echo.json"
    rec = json.loads(p.read_text())
    del rec["goals"]
    p.write_text(json.dumps(rec))
    (repo / "benchmarks" / "results" / "echo_R8.json").unlink()
    report.main(["--repo", str(repo)])
    got = rows((repo / "README.md").read_text())
    assert got["start-up"] == "not a figure (foreign CPU share 0.2 > 0.05)"
    assert got["batch augmentation"] == "not a figure (dirty tree)"
    assert got["Figure 5"] == "not a figure (commit ddddddd, the others at ccccccc)"
    assert got["data echoing, text"] == "not a figure (its results file lacks 'goals')"
    assert got["data echoing, images"] == "no results yet"
    startup = (repo / "docs/benchmarks/startup.md").read_text()
    assert "| `benchmarks/results/startup.json` | not a figure (foreign CPU share 0.2 > 0.05) |" in startup
    assert "15.4 s" not in startup.split("<!-- bench-report:startup -->")[1].split("<!-- /bench-report")[0]


def test_a_later_record_no_part_writes_does_not_move_the_reports_commit(repo):
    results = repo / "benchmarks" / "results"
    rec = json.loads((results / "accelerator.json").read_text())
    rec["provenance"].update(commit="e" * 40, ended="2027-02-01T00:00:00Z")
    (results / "accelerator_by_hand.json").write_text(json.dumps(rec))
    res = report.load(results, [])
    assert res.commit == C
    assert res.status("accelerator.json") == f"figure (commit {C[:7]})"
    assert res.status("accelerator_by_hand.json") == "not a figure (a record of commit eeeeeee, not in make bench)"
    assert res.record("accelerator_by_hand.json") is not None and res.figure("accelerator_by_hand.json") is None


def test_a_record_table_quotes_a_clean_quiet_record_at_its_own_commit(repo):
    results = repo / "benchmarks" / "results"
    rec = json.loads((results / "accelerator.json").read_text())
    for r in rec["rows"]:
        r.update(loop_step_share=0.25, loop_input_wait_share=0.5, loop_eval_share=0.125, loop_other_share=0.125)
    rec["provenance"].update(commit="e" * 40)
    (results / "accelerator_by_hand.json").write_text(json.dumps(rec))
    res = report.load(results, [])
    lines = report.record_table(("accelerator_by_hand.json",), report.t_loop_profile)(res)
    assert lines[0] == ("A record at commit `eeeeeee` (run by hand, not in `make bench`), from "
                        "`benchmarks/results/accelerator_by_hand.json`:")
    assert "| R3 | 1 | batch_auto | 0.95 | 0.25 | 0.50 | 0.12 | 0.12 |" in lines
    rec["provenance"].update(clean=False)
    (results / "accelerator_by_hand.json").write_text(json.dumps(rec))
    lines = report.record_table(("accelerator_by_hand.json",), report.t_loop_profile)(report.load(results, []))
    assert lines[-1] == "| `benchmarks/results/accelerator_by_hand.json` | not a figure (dirty tree) |"


def test_no_figure_says_so_above_the_table(repo):
    for name in SOURCES:
        set_prov(repo, name, clean=False)
    report.main(["--repo", str(repo)])
    readme = (repo / "README.md").read_text()
    assert "Figures at commit: none yet" in readme
    assert all(v in ("not a figure (dirty tree)", "no results yet") for v in rows(readme).values())


def test_missing_markers_are_bad_input_and_check_writes_nothing(repo, capsys):
    before = (repo / "README.md").read_text()
    assert report.main(["--repo", str(repo), "--check"]) == 1
    assert "README.md differs from its results files" in capsys.readouterr().err
    assert (repo / "README.md").read_text() == before
    page = repo / "docs/benchmarks/search.md"
    page.write_text(page.read_text().replace("<!-- /bench-report:search -->", ""))
    assert report.main(["--repo", str(repo)]) == 2
    assert "docs/benchmarks/search.md: expected one pair of <!-- bench-report:search --> markers" in \
        capsys.readouterr().err
    assert (repo / "README.md").read_text() == before  # nothing half-written


def test_the_part_list_fits_its_budgets_and_writes_every_headline_file():
    names = [p.name for p in parts.PARTS]
    assert len(names) == len(set(names))
    assert sum(p.minutes for p in parts.PARTS) <= parts.BUDGET_MIN == 150  # issue 64
    assert sum(p.quick_minutes for p in parts.PARTS) <= parts.QUICK_BUDGET_MIN == 20
    written = {f for p in parts.PARTS for f in p.results}
    assert {f for _, files, _, _ in report.HEADLINE for f in files} <= written
    for p in parts.PARTS:
        for cmd in p.command + p.quick:
            assert cmd[0].startswith("benchmarks/") and cmd[0].endswith(".py")
            script = REPO / cmd[0]
            if not script.exists():
                assert p.name in ("accelerator", "control_plane"), cmd  # issues 60 and 61 add them
                continue
            src = script.read_text()  # every flag is the script's (lm.py, fashion_mnist.py: a SCALE key)
            flags = [a for a in cmd[1:] if a.startswith("--")]
            assert [f for f in flags if f'"{f}"' not in src and f'"{f[2:].replace("-", "_")}"' not in src] == [], cmd
    assert parts.part_of("startup.json").name == "startup" and parts.part_of("echo_R5.json") is None
    with pytest.raises(KeyError, match="no benchmark part 'nope'; the parts: startup, echo_images"):
        parts.by_name("nope")
