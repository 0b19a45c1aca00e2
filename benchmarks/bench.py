"""Run the parts of benchmarks/parts.py: `make bench`, `make bench PART=name`, `make bench-quick`.

    python benchmarks/bench.py [--part NAME ...] [--quick]

Full runs refuse a dirty tree (any change to a tracked or untracked file outside
benchmarks/results/, exit 2) unless BENCH_ALLOW_DIRTY=1, which runs them but records
`clean: false`, so their files are "not a figure". Each part runs in a session of its own
(its processes count as the benchmark's own in the foreign CPU share); a part whose results
file records a foreign CPU share above 0.05 is run again, at most BENCH_TRIES times (3),
each rerun's file recording the shares of the attempts thrown away (`rejected_attempts`).
Every part of one invocation must record the commit the invocation started at.

--quick runs each part's smoke command, results to runs/bench-quick/ (or the script's
temporary folder), never benchmarks/results/; a dirty tree is allowed.
Exit status: 0 every part ran and wrote its files; 1 a part failed; 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import parts as plist
import provenance as cpu

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout


def dirty_paths() -> list[str]:
    """Changed tracked or untracked files outside benchmarks/results/ (common.py's rule)."""
    return [ln[3:] for ln in git("status", "--porcelain", "--", ".", ":(exclude)benchmarks/results").splitlines()]


def run_commands(part: plist.Part, commands, env: dict) -> bool:
    for cmd in commands:
        if not (REPO / cmd[0]).exists():
            print(f"bench: part {part.name}: {cmd[0]} is not on this commit", file=sys.stderr)
            return False
        print(f"bench: {part.name}: {' '.join(cmd)}", flush=True)
        if subprocess.run([sys.executable, *cmd], cwd=REPO, env=env, start_new_session=True).returncode != 0:
            print(f"bench: part {part.name}: {cmd[0]} failed", file=sys.stderr)
            return False
    return True


def written(part: plist.Part, since: float, commit: str) -> list[dict]:
    """The provenance of each of the part's results files; raises if one was not written by
    this run (older than `since`) or records another commit."""
    provs = []
    for name in part.results:
        path = RESULTS / name
        if not path.exists() or path.stat().st_mtime < since:
            raise RuntimeError(f"part {part.name} did not write benchmarks/results/{name}")
        prov = json.loads(path.read_text()).get("provenance") or {}
        if prov.get("commit") != commit:
            raise RuntimeError(f"benchmarks/results/{name} records commit {prov.get('commit')}, not {commit}")
        provs.append(prov)
    return provs


def run_part(part: plist.Part, commit: str, tries: int) -> bool:
    """The part, rerun while its files' foreign CPU share is above the limit (at most `tries`)."""
    ok = True
    since = time.time()

    def once(attempts: list[float]) -> None:
        nonlocal ok, since
        since = time.time()
        env = {**os.environ, "ECHORAY_BENCH_PART": part.name, "ECHORAY_BENCH_ATTEMPTS": json.dumps(attempts)}
        ok = run_commands(part, part.command, env)

    def shares() -> list[float]:
        nonlocal ok
        if not ok:
            return []
        try:
            return [float(p.get("foreign_cpu_share") or 0.0) for p in written(part, since, commit)]
        except RuntimeError as exc:
            print(f"bench: {exc}", file=sys.stderr)
            ok = False
            return []

    attempts = cpu.run_until_quiet(once, shares, tries)
    if ok and attempts[-1] > cpu.LIMIT:
        print(f"bench: part {part.name}: foreign CPU share {attempts[-1]:.2f} in all {len(attempts)} tries: "
              "its files are not figures", file=sys.stderr)
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", nargs="*", default=[], help="part names (default: all, in order)")
    ap.add_argument("--quick", action="store_true", help="each part's smoke command")
    a = ap.parse_args(argv)
    try:
        chosen = [plist.by_name(n) for n in a.part] or list(plist.PARTS)
    except KeyError as exc:
        print(f"bench: {exc.args[0]}", file=sys.stderr)
        return 2
    commit = git("rev-parse", "HEAD").strip()
    if not a.quick and dirty_paths() and os.environ.get("BENCH_ALLOW_DIRTY") != "1":
        print("bench: the tree is not clean (figures come from one clean commit; BENCH_ALLOW_DIRTY=1 runs "
              "anyway and marks the results not figures):\n  " + "\n  ".join(dirty_paths()), file=sys.stderr)
        return 2
    failed = []
    for part in chosen:
        t0 = time.time()
        if a.quick:
            env = {**os.environ, "ECHORAY_BENCH_RESULTS": str(REPO / "runs" / "bench-quick")}
            ok = run_commands(part, part.quick, env)
        else:
            ok = run_part(part, commit, int(os.environ.get("BENCH_TRIES", "3")))
        print(f"bench: {part.name}: {'done' if ok else 'FAILED'} in {(time.time() - t0) / 60:.1f} min", flush=True)
        if not ok:
            failed.append(part.name)
    if failed:
        print(f"bench: failed parts: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
