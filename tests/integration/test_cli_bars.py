"""`echoray train` on a terminal draws the epoch bar (runtime/epoch_bar.py) under its lines;
with stdout a pipe it prints the plain lines, no bar and no carriage return. The terminal is
a pty sized as a terminal emulator sizes it, the real console script on its slave side."""

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time

import ray
from test_cli_run import echoray_bin

TINY = ["train", "--out", "run", "--set", "source.limit=256", "--set", "train.max_epochs=2",
        "--set", "train.target=null", "--set", "scaling.local_mode=true"]


def on_a_terminal(args: list[str], cwd, env: dict) -> tuple[int, str]:
    """Run on a 30 x 100 pty; its exit code and all it wrote (read until it exits)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    shown, deadline = b"", time.monotonic() + 600
    while time.monotonic() < deadline:
        if select.select([master], [], [], 1.0)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every process holding the slave has closed it
                break
            if not chunk:
                break
            shown += chunk
        elif proc.poll() is not None:  # exited, and all it wrote was read (a Ray process may hold the slave)
            break
    os.close(master)
    return proc.wait(timeout=10), shown.decode(errors="replace")


def test_train_draws_the_epoch_bar_on_a_terminal_and_plain_lines_to_a_pipe(local_ray, tmp_path, sqlite_uri):
    # both runs attach to the tests' local Ray and share one store: no Ray start or migration each
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    cmd = [echoray_bin(), *TINY, "--set", f"tracking.uri={sqlite_uri}"]
    for where in ("tty", "pipe"):
        (tmp_path / where).mkdir()
    code, shown = on_a_terminal(cmd, tmp_path / "tty", env)
    assert code == 0, shown[-3000:]
    # tqdm's frames: each redraw starts with "\r": the pass in progress, its share of the fresh
    # examples, the step (which pass the first poll finds depends on the machine's speed)
    frames = [f for f in shown.split("\r") if f.startswith("[echoray] epoch ")]
    assert frames, shown[-3000:]
    assert all(re.match(r"\[echoray\] epoch [12]/2 \|.*\| +\d+%, step \d+  trained \d+  epoch ETA ", f)
               for f in frames), frames
    assert "[echoray] eval   1  epoch" in shown  # the lines still print, above the bar

    piped = subprocess.run(cmd, cwd=tmp_path / "pipe", env=env, capture_output=True, text=True, timeout=600)
    assert piped.returncode == 0, piped.stderr[-3000:]
    assert "[echoray] eval   1  epoch" in piped.stdout
    assert "\r" not in piped.stdout + piped.stderr and "[echoray] epoch 1/2 |" not in piped.stdout
