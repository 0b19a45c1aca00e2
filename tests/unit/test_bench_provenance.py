"""The foreign CPU share (benchmarks/provenance.py) over made-up /proc snapshots, and the
recorded provenance every results file carries (benchmarks/common.py's `save`)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time

import pytest

from helpers import REPO, load_benchmark

prov = load_benchmark("provenance")
Proc, Sample = prov.Proc, prov.Sample
BENCH = REPO / "benchmarks"


def snap(uptime: int, busy: int, *procs: tuple) -> Sample:
    """procs: (pid, ppid, sid, cpu_ticks, start_ticks[, kernel])."""
    return Sample(uptime, busy, {p[0]: Proc(*p) for p in procs})


def test_parse_cpu_line_sums_the_busy_fields():
    text = "cpu  100 5 50 9000 40 3 2 1 7 0\ncpu0 50 2 25 4500 20 1 1 0 0 0\nintr 1\n"
    assert prov.parse_cpu_line(text) == 100 + 5 + 50 + 3 + 2 + 1  # not idle, iowait, nor guest (in user)
    with pytest.raises(ValueError, match="no aggregate 'cpu' line"):
        prov.parse_cpu_line("cpu0 1 2 3\n")


def test_parse_pid_stat_reads_a_command_name_with_spaces_and_parentheses():
    # fields after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
    rest = "S 41 42 43 0 -1 4194560 10 0 0 0 120 30 5 6 20 0 1 0 98765 1000 20"
    p = prov.parse_pid_stat(f"4242 (ray::Map (a) b) {rest}")
    assert p == Proc(pid=4242, ppid=41, sid=43, cpu_ticks=150, start_ticks=98765, kernel=False)
    kernel = prov.parse_pid_stat(f"2 (kthreadd) {rest.replace('4194560', str(0x00200040))}")
    assert kernel.kernel is True


ROOT = 100


def run_samples() -> list[Sample]:
    """A benchmark (100) with a child (101) that forks 102 (gone by the end) and 103
    (reparented to init when 101 exits); a foreign process (200) busy throughout, one
    (300) that starts and ends between the first and last samples, a kernel thread (2),
    and pid 200 reused by a new process after the first ended."""
    first = snap(1000, 10_000,
                 (2, 0, 0, 500, 0, True), (ROOT, 50, 50, 40, 900), (101, ROOT, 50, 10, 950),
                 (200, 1, 200, 1000, 10))
    middle = snap(1100, 10_150,
                  (2, 0, 0, 520, 0, True), (ROOT, 50, 50, 70, 900), (101, ROOT, 50, 60, 950),
                  (102, 101, 50, 25, 1050), (103, 101, 50, 5, 1060), (200, 1, 200, 1020, 10),
                  (300, 1, 300, 12, 1080))
    last = snap(1200, 10_300,
                (2, 0, 0, 600, 0, True), (ROOT, 50, 50, 100, 900), (103, 1, 50, 45, 1060),
                (200, 1, 200, 8, 1150))
    return [first, middle, last]


def test_foreign_share_counts_other_processes_over_the_machines_busy_time():
    got = prov.foreign_cpu_share(run_samples(), ROOT)
    # own: root 60, 101 50 (until its last sighting), 102 25 and 103 45 (started inside the window)
    # foreign: 200's first life 20, its successor 8 (started inside), 300 12; the kernel thread nothing
    t = prov.TICKS
    assert got == {"own_cpu_s": 180 / t, "foreign_cpu_s": 40 / t, "busy_cpu_s": 300 / t,
                   "foreign_cpu_share": round(40 / 300, 4)}


def test_a_session_given_as_the_parts_counts_its_processes_as_own():
    samples = run_samples()
    for s in samples:  # a process of the part's session that is no descendant (a sibling script)
        s.procs[400] = Proc(400, 1, 50, 1000 + (s.uptime_ticks - 1000) // 10, 800)
    assert prov.foreign_cpu_share(samples, ROOT)["foreign_cpu_s"] == 60 / prov.TICKS
    assert prov.foreign_cpu_share(samples, ROOT, session=50)["foreign_cpu_s"] == 40 / prov.TICKS


def test_a_session_the_root_leads_is_own():
    s0 = snap(0, 0, (ROOT, 1, ROOT, 0, 0), (7, 1, ROOT, 0, 0), (8, 1, 8, 0, 0))
    s1 = snap(100, 100, (ROOT, 1, ROOT, 10, 0), (7, 1, ROOT, 30, 0), (8, 1, 8, 60, 0))
    assert prov.foreign_cpu_share([s0, s1], ROOT) == {
        "own_cpu_s": 40 / prov.TICKS, "foreign_cpu_s": 60 / prov.TICKS, "busy_cpu_s": 100 / prov.TICKS,
        "foreign_cpu_share": 0.6}


def test_a_process_first_seen_after_the_first_sample_started_inside_even_in_its_tick():
    # Its start tick equals the first sample's (both in one 10 ms tick): all its time counts.
    s0 = snap(1000, 0, (ROOT, 1, ROOT, 0, 0))
    s1 = snap(1050, 50, (ROOT, 1, ROOT, 0, 0), (9, ROOT, ROOT, 40, 1000))
    s2 = snap(1100, 100, (ROOT, 1, ROOT, 0, 0), (9, ROOT, ROOT, 50, 1000))
    assert prov.foreign_cpu_share([s0, s1, s2], ROOT)["own_cpu_s"] == 50 / prov.TICKS


def test_no_samples_or_no_busy_time_is_a_zero_share():
    assert prov.foreign_cpu_share([], ROOT)["foreign_cpu_share"] == 0.0
    idle = snap(0, 5, (ROOT, 1, 1, 0, 0))
    assert prov.foreign_cpu_share([idle, idle], ROOT)["foreign_cpu_share"] == 0.0


def test_read_sample_reads_a_proc_tree(tmp_path):
    (tmp_path / "stat").write_text("cpu  10 0 5 100 0 0 0 0 0 0\n")
    (tmp_path / "uptime").write_text("12.50 20.00\n")
    for pid, ppid in ((1, 0), (77, 1)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(
            f"{pid} (x) S {ppid} {pid} {pid} 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 55 0 0")
    (tmp_path / "self").mkdir()
    (tmp_path / "999").mkdir()  # a process that ended while /proc was read: no stat file
    s = prov.read_sample(tmp_path)
    assert (s.busy_ticks, s.uptime_ticks) == (15, int(12.5 * prov.TICKS))
    assert sorted(s.procs) == [1, 77] and s.procs[77] == Proc(77, 1, 77, 7, 55)


def test_the_monitor_counts_a_child_of_this_process_as_own():
    mon = prov.CpuMonitor(interval_s=0.1).start()
    # The child burns 0.5 CPU-s, then stays alive long enough for a sample to see all of it
    # (the monitor counts a process up to its last sample: the contract, not a timing guess).
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\n"
                    "while time.process_time() - t < 0.5: pass\ntime.sleep(1.0)"], check=True)
    got = mon.result()
    mon.stop()
    assert got["own_cpu_s"] >= 0.45 and 0.0 <= got["foreign_cpu_share"] <= 1.0
    assert got["busy_cpu_s"] >= got["own_cpu_s"] * 0.9  # the machine was at least as busy as we were


def test_busy_cores_is_the_busy_ticks_over_the_window(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 900 0 0 0 0 0 0\n")
    clock = iter([10.0, 12.0])
    monkeypatch.setattr(prov.time, "monotonic", lambda: next(clock))
    # 1.5 cores over the 2 s window: 3 CPU-seconds of user + system time
    monkeypatch.setattr(prov.time, "sleep", lambda s: stat.write_text(
        f"cpu  {100 + 2 * prov.TICKS} 0 {50 + prov.TICKS} 900 0 0 0 0 0 0\n"))
    assert prov.busy_cores(2.0, tmp_path) == pytest.approx(1.5)


def test_window_use_gives_cores_over_the_wall_time():
    result = {"own_cpu_s": 19.6, "foreign_cpu_s": 0.1, "busy_cpu_s": 19.8, "foreign_cpu_share": 0.0051}
    assert prov.window_use(result, 10.0) == {"own_cores": 1.96, "busy_cores": 1.98, "foreign_cpu_share": 0.0051}


def test_quiet_machine_waits_for_the_busy_cores_to_fall_or_times_out(monkeypatch):
    common = load_benchmark("common")
    readings = iter([1.9, 0.8, 0.1, 0.05])
    monkeypatch.setattr(common.cpu, "busy_cores", lambda window_s: next(readings))
    assert common.quiet_machine(max_busy_cores=0.15, timeout_s=60) == 0.1  # the first quiet reading
    monkeypatch.setattr(common.cpu, "busy_cores", lambda window_s: 1.9)
    assert common.quiet_machine(timeout_s=0.0) == 1.9  # never quiet: the last reading, after the timeout


def test_run_cpu_counts_the_runs_own_cpu(monkeypatch):
    monkeypatch.delenv("ECHORAY_BENCH_PART", raising=False)
    common = load_benchmark("common")
    with common.RunCpu() as use:
        subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\n"
                        "while time.process_time() - t < 0.5: pass\ntime.sleep(1.2)"], check=True)
    assert set(use.record) == {"own_cores", "busy_cores", "foreign_cpu_share"}
    # 0.5 CPU-s of the child's (seen by a sample in its last second) over a run of at least 1.7 s
    assert 0.45 / 10 <= use.record["own_cores"] <= 0.5 / 1.7 + 0.2
    assert 0.0 <= use.record["foreign_cpu_share"] <= 1.0


@pytest.mark.parametrize(("record", "reason"), [
    (None, "no provenance"),
    ({"commit": "a", "dirty": True}, "dirty tree"),
    ({"commit": "a", "clean": False, "started": "s", "ended": "e", "foreign_cpu_share": 0.0}, "dirty tree"),
    ({"commit": "a", "dirty": False}, "no foreign CPU share recorded"),
    ({"commit": "a", "clean": True, "foreign_cpu_share": 0.01}, "provenance lacks started, ended"),
    ({"commit": "a", "clean": True, "started": "s", "ended": "e", "foreign_cpu_share": 0.051},
     "foreign CPU share 0.051 > 0.05"),
    ({"commit": "a", "clean": True, "started": "s", "ended": "e", "foreign_cpu_share": 0.05}, None),
])
def test_verdict(record, reason):
    assert prov.verdict(record) == reason


def test_run_until_quiet_reruns_at_most_tries_times_and_passes_the_attempts():
    calls, shares = [], iter([[0.3, 0.01], [0.2], [0.04], [0.0]])
    assert prov.run_until_quiet(calls.append, lambda: next(shares), tries=3) == [0.3, 0.2, 0.04]
    assert calls == [[], [0.3], [0.3, 0.2]]
    calls, shares = [], iter([[0.3], [0.2], [0.0]])
    assert prov.run_until_quiet(calls.append, lambda: next(shares), tries=2) == [0.3, 0.2]
    assert prov.run_until_quiet(lambda a: None, lambda: [], tries=3) == [0.0]


def test_save_writes_the_recorded_form(tmp_path, monkeypatch):
    common = load_benchmark("common")
    monkeypatch.setattr(common.os, "getloadavg", lambda: (0.25, 0.5, 0.75))
    monkeypatch.setenv("ECHORAY_BENCH_ATTEMPTS", "[0.31, 0.07]")
    args = argparse.Namespace(seeds=3, repeats=2, other="x")
    try:
        path = common.save("x", {"figure": 1.0}, args, start_load=(0.1, 0.2, 0.3), path=tmp_path / "x.json")
    finally:  # the monitor the save started (no benchmark script started one): its thread ends here
        common._Start.monitor.stop()
        common._Start.monitor = None
    rec = json.loads(path.read_text())
    assert rec["figure"] == 1.0
    assert rec["load_avg"] == {"start": 0.1, "end": 0.25, "start_1_5_15": [0.1, 0.2, 0.3],
                               "end_1_5_15": [0.25, 0.5, 0.75]}
    p = rec["provenance"]
    assert {"commit", "clean", "seeds", "repeats", "started", "ended", "cpus", "foreign_cpu_share"} <= set(p)
    assert re.fullmatch(r"[0-9a-f]{40}", p["commit"]) and isinstance(p["clean"], bool)
    assert (p["seeds"], p["repeats"], p["args"]) == (3, 2, {"seeds": 3, "repeats": 2, "other": "x"})
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    assert time.strptime(p["started"], stamp) <= time.strptime(p["ended"], stamp)
    assert 0.0 <= p["foreign_cpu_share"] <= 1.0 and p["rejected_attempts"] == [0.31, 0.07]
    # not busy >= foreign: /proc/stat and the processes' own counters are read at slightly
    # different instants, so under load one can run ahead of the other (the share is capped at 1)
    assert p["cpus"] >= 1 and p["busy_cpu_s"] >= 0 and p["foreign_cpu_s"] >= 0


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.py")
                                          if p.name not in ("common.py", "provenance.py", "report.py", "bench.py",
                                                            "parts.py")))
def test_every_benchmark_writes_results_through_save(script):
    """A script that writes a results JSON does it with common.save (the recorded
    provenance), and none reads its reported runs from elsewhere (a cache or an earlier file)."""
    src = (BENCH / script).read_text()
    writes = re.findall(r"RESULTS\s*/\s*[^\n]*\.json[^\n]*\)\.write_text|write_text\(json\.dumps", src)
    # startup_timeline's child writes its trace to a temp file for the parent, not a result
    assert [w for w in writes if script != "startup_timeline.py"] == [], writes
    if re.search(r"\bsave\(", src) is None:
        assert "results" not in re.sub(r"benchmarks/results/\S+\.(png|json)", "", src).split('"""', 2)[-1], script
    for flag in ("--runs-file", "--baseline-from", "--runs-from"):
        assert flag not in src, (script, flag)
