"""Runs command lines for tests/test_policy_real_programs.py inside its bubblewrap sandbox, one a line.

    python -I sandboxed_runner.py ROOT PIPE SECRET

Reads a JSON object per stdin line, {"argv": [...], "fresh": bool}, and writes one JSON object per line:
what the program printed (stdout and stderr), whether it opened PIPE for reading (fed SECRET whenever it
has a reader; a program still running after TIMEOUT_S is killed and counts as having opened it) and a
snapshot of ROOT before and after. "Before" is the last command's "after" unless the request says the
root was changed from outside since ("fresh"). One sandbox serves every command line of a test module: starting bubblewrap for each took two
thirds of each check's ~22 ms.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
import time

TIMEOUT_S = 20


def snapshot(root: str) -> dict[str, str]:
    """Every path under `root` (relative) with its content's hash, its link target or "dir"."""
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if rel == os.path.join(".git", "index"):  # git status refreshes its stat cache
                continue
            if os.path.islink(path):
                out[rel] = "link:" + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    out[rel] = hashlib.sha256(f.read()).hexdigest()
            else:
                out[rel] = "dir"
    return out


def feed(pipe: str, secret: bytes) -> bool:
    """Write `secret` into the named pipe if a reader has it open; whether one had."""
    try:
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader
        return False
    with contextlib.suppress(OSError):
        os.write(fd, secret)
    os.close(fd)
    return True


def run(argv: list[str], root: str, pipe: str, secret: bytes) -> tuple[str, bool]:
    """What `argv` printed, and whether it opened the pipe (or hung)."""
    try:
        proc = subprocess.Popen(argv, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
    except OSError as e:
        return f"not started: {e}", False
    assert proc.stdout is not None
    chunks: list[bytes] = []
    out = proc.stdout.fileno()
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(out, 65536), b"")), daemon=True)
    reader.start()
    opened, deadline = False, time.monotonic() + TIMEOUT_S
    while proc.poll() is None and time.monotonic() < deadline:
        opened = feed(pipe, secret) or opened
        time.sleep(0.001)
    if proc.poll() is None:
        proc.kill()
        opened = True  # hung: waiting on the outside pipe (opened for writing) counts as touching it
    proc.wait()
    reader.join(timeout=2)  # a child the program left running may hold its output open
    if not reader.is_alive():
        proc.stdout.close()
    return b"".join(chunks).decode(errors="replace"), opened


def main() -> None:
    root, pipe, secret = sys.argv[1], sys.argv[2], (sys.argv[3] + "\n").encode()
    last = snapshot(root)
    for line in sys.stdin:
        request = json.loads(line)
        before = snapshot(root) if request["fresh"] else last
        printed, opened = run(request["argv"], root, pipe, secret)
        last = snapshot(root)
        answer = {"printed": printed, "opened": opened, "before": before, "after": last}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
