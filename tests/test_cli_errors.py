"""Bad input to the console script gets one clear line naming the fix, never a traceback, and leaves
no partial file behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONSOLE_SCRIPT = Path(sys.executable).with_name("generalagent-mcp")


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([str(CONSOLE_SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env,
                          cwd=cwd)


def one_clear_line(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode in (1, 2), done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().count("\n") <= 2, done.stderr  # argparse: usage + the error
    for word in words:
        assert word in done.stderr, done.stderr


@pytest.mark.parametrize(("target", "words"), [
    ("folder", ("is a folder", "give a file name")),
    ("", ("Give the file to write",)),
    ("missing/dir/x.gz", ("does not exist", "create it first")),
])
def test_export_to_a_path_that_cannot_be_a_file(tmp_path: Path, target: str, words: tuple[str, ...]) -> None:
    (tmp_path / "folder").mkdir()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    done = run(tmp_path / "folder", "--data-dir", str(tmp_path / "data"), "export",
               str(tmp_path / target) if target else "")
    one_clear_line(done, *words)
    after = sorted(p.name for p in tmp_path.rglob("*"))
    assert [name for name in after if name not in before and name != "data"] == []  # no .partial


def test_import_of_random_bytes(tmp_path: Path) -> None:
    noise = tmp_path / "noise"
    noise.write_bytes(bytes(range(256)) * 4)
    one_clear_line(run(tmp_path, "--data-dir", str(tmp_path / "data"), "import", str(noise)),
                   "is not a generalagent-mcp export file")
    gz = tmp_path / "noise.gz"
    gz.write_bytes(b"\x1f\x8b" + bytes(range(200)))
    one_clear_line(run(tmp_path, "--data-dir", str(tmp_path / "data2"), "import", str(gz)),
                   "is not a generalagent-mcp export file")


@pytest.mark.parametrize("command", [["status"], ["approve", "--list"], ["export", "out.jsonl"], ["migrate"]])
def test_a_data_dir_that_is_a_file_or_cannot_be_made(tmp_path: Path, command: list[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    one_clear_line(run(tmp_path, "--data-dir", str(blocker), *command), "is a file, not a folder", "--data-dir")
    one_clear_line(run(tmp_path, "--data-dir", str(blocker / "sub"), *command), "a part of its path is a file")
    one_clear_line(run(tmp_path, "--data-dir", "/proc/no-such-data-dir", *command), "cannot be created")


@pytest.mark.parametrize(("option", "value"), [("--port", "99999"), ("--port", "-1"), ("--port", "x"),
                                               ("--workers", "0"), ("--workers", "100000")])
def test_serve_refuses_ports_and_worker_counts_out_of_range(tmp_path: Path, option: str, value: str) -> None:
    done = run(tmp_path, "serve", "--transport", "http", option, value)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "out of range" in done.stderr \
        or "not a whole number" in done.stderr, done.stderr


@pytest.mark.parametrize("command", [["doctor", "--json"], ["--help"], ["policy", "show"]])
def test_a_reader_that_goes_away_ends_it_quietly(tmp_path: Path, command: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    env.update(PYTHONPATH=str(ROOT), GENERALAGENT_DATA_DIR=str(tmp_path / "data"))
    read, write = os.pipe()
    os.close(read)  # nobody will read: the first write fails with EPIPE
    try:
        done = subprocess.run([str(CONSOLE_SCRIPT), *command], stdout=write, stderr=subprocess.PIPE, text=True,
                              timeout=120, env=env, cwd=tmp_path)
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert command == ["--help"] or done.returncode == 1


@pytest.mark.parametrize("option", ["--data-dir", "--root"])
def test_an_empty_folder_option_is_refused_not_taken_as_the_cwd(tmp_path: Path, option: str) -> None:
    done = run(tmp_path, option, "", "status")
    one_clear_line(done, "is empty", "give a folder")
    assert done.returncode == 2 and not list(tmp_path.iterdir())  # nothing written in the current folder
