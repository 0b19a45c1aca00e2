"""`make bench` (benchmarks/bench.py) in a throw-away git checkout: a dirty tree is refused,
a part whose file records a foreign CPU share above 0.05 is rerun and the kept file lists
the attempts thrown away, a part that writes nothing fails."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from helpers import REPO, load_benchmark

bench = load_benchmark("bench")

# A part's script: saves through the real common.save, then sets the foreign share to the
# next of SHARES (the machine's real share depends on who else runs); counts its runs.
FAKE = '''
import json, sys
from pathlib import Path
import common
here = Path(__file__).parent
n = int((here / "runs").read_text()) if (here / "runs").exists() else 0
(here / "runs").write_text(str(n + 1))
shares = json.loads((here / "shares.json").read_text())
path = common.save("fake", {"n": n})
rec = json.loads(path.read_text())
rec["provenance"]["foreign_cpu_share"] = shares[min(n, len(shares) - 1)]
path.write_text(json.dumps(rec))
'''


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "benchmarks" / "results").mkdir(parents=True)
    for f in ("common.py", "provenance.py"):
        shutil.copy(REPO / "benchmarks" / f, root / "benchmarks" / f)
    (root / "benchmarks" / "fake.py").write_text(FAKE)
    (root / "benchmarks" / "silent.py").write_text("print('writes nothing')\n")
    (root / ".gitignore").write_text("benchmarks/runs\nbenchmarks/shares.json\n__pycache__/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    monkeypatch.setattr(bench, "REPO", root)
    monkeypatch.setattr(bench, "RESULTS", root / "benchmarks" / "results")
    fake = bench.plist.Part("fake", (("benchmarks/fake.py",),), ("fake.json",), 1, (("benchmarks/fake.py",),), 1)
    silent = bench.plist.Part("silent", (("benchmarks/silent.py",),), ("silent.json",), 1, (), 0)
    monkeypatch.setattr(bench.plist, "PARTS", (fake, silent))
    monkeypatch.delenv("BENCH_ALLOW_DIRTY", raising=False)
    monkeypatch.delenv("ECHORAY_BENCH_RESULTS", raising=False)
    return root


def shares(root, values):
    (root / "benchmarks" / "shares.json").write_text(json.dumps(values))


def test_a_loaded_run_is_repeated_and_the_kept_file_records_the_attempts(checkout, monkeypatch):
    shares(checkout, [0.3, 0.2, 0.01])
    assert bench.main(["--part", "fake"]) == 0
    rec = json.loads((checkout / "benchmarks" / "results" / "fake.json").read_text())
    assert rec["n"] == 2 and (checkout / "benchmarks" / "runs").read_text() == "3"
    p = rec["provenance"]
    assert p["rejected_attempts"] == [0.3, 0.2] and p["foreign_cpu_share"] == 0.01
    assert p["commit"] == git(checkout, "rev-parse", "HEAD").strip() and p["clean"] is True
    assert p["command"] == ["fake.py"]


def test_reruns_stop_at_bench_tries(checkout, monkeypatch, capsys):
    shares(checkout, [0.3])
    monkeypatch.setenv("BENCH_TRIES", "2")
    assert bench.main(["--part", "fake"]) == 0
    assert (checkout / "benchmarks" / "runs").read_text() == "2"
    assert "part fake: foreign CPU share 0.30 in all 2 tries: its files are not figures" in capsys.readouterr().err


def test_a_dirty_tree_is_refused_unless_allowed(checkout, monkeypatch, capsys):
    shares(checkout, [0.0])
    (checkout / "benchmarks" / "results" / "old.json").write_text("{}")  # results do not count
    assert bench.dirty_paths() == []
    (checkout / "benchmarks" / "fake.py").write_text(FAKE + "\n")
    assert bench.main(["--part", "fake"]) == 2
    err = capsys.readouterr().err
    assert "the tree is not clean" in err and "benchmarks/fake.py" in err
    assert not (checkout / "benchmarks" / "runs").exists()
    monkeypatch.setenv("BENCH_ALLOW_DIRTY", "1")
    assert bench.main(["--part", "fake"]) == 0
    p = json.loads((checkout / "benchmarks" / "results" / "fake.json").read_text())["provenance"]
    assert p["clean"] is False and p["allow_dirty"] is True


def test_a_part_that_writes_nothing_fails_and_an_unknown_part_is_bad_input(checkout, capsys):
    assert bench.main(["--part", "silent"]) == 1
    assert "part silent did not write benchmarks/results/silent.json" in capsys.readouterr().err
    assert bench.main(["--part", "nope"]) == 2
    assert "no benchmark part 'nope'" in capsys.readouterr().err


def test_quick_runs_the_smoke_commands_into_runs_bench_quick(checkout):
    shares(checkout, [0.9])
    (checkout / "benchmarks" / "fake.py").write_text(FAKE + "\n")  # a dirty tree is fine for a smoke run
    assert bench.main(["--quick", "--part", "fake"]) == 0
    assert (checkout / "runs" / "bench-quick" / "fake.json").exists()
    assert not (checkout / "benchmarks" / "results" / "fake.json").exists()
