"""The quiet console (echoray/console.py): library output written to the process's stderr
goes to the log, first a temporary file, then RUN_DIR/console.log with what came before;
echoray's own error lines still reach the terminal; restore() puts stderr back; nothing is
diverted when quiet mode was not asked for or sys.stderr is not fd 2."""

import subprocess
import sys

from helpers import REPO

SCRIPT = """
import os, sys
sys.path.insert(0, {platform!r})
from pathlib import Path
from echoray import console

assert console.divert() is False            # not asked for: nothing changes
console.want_quiet()
assert console.divert() is True
early = console.log_path()
os.write(2, b"C-level line before the run folder\\n")
print("python-level library line", file=sys.stderr, flush=True)
print("[echoray] own error line", file=console.stderr(), flush=True)
path = console.settle(Path({run_dir!r}))
assert path == Path({run_dir!r}) / "console.log" and not early.exists()
os.write(2, b"C-level line after\\n")
console.restore()
os.write(2, b"back on the terminal\\n")
print("[echoray] stdout stays", flush=True)
"""


def test_library_output_goes_to_the_run_log_and_echoray_lines_to_the_terminal(tmp_path):
    run_dir = tmp_path / "run"
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(platform=str(REPO / "platform"), run_dir=str(run_dir))],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "[echoray] stdout stays\n"
    assert out.stderr == "[echoray] own error line\nback on the terminal\n"
    assert (run_dir / "console.log").read_text() == (
        "C-level line before the run folder\npython-level library line\nC-level line after\n")


def test_a_log_that_never_reached_a_run_folder_is_named_when_it_holds_something(tmp_path):
    script = f"""
import os, sys
sys.path.insert(0, {str(REPO / "platform")!r})
from echoray import console
console.want_quiet()
console.divert()
path = console.log_path()
os.write(2, b"ray said something\\n")
console.restore()
print(path, open(path).read(), end="")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    path, said = out.stdout.split(" ", 1)
    assert said == "ray said something\n"
    assert out.stderr == f"echoray: Ray's and MLflow's messages of this run: {path}\n"
