"""Without PostgreSQL binaries the PostgreSQL tests skip and say how to install them; under CI=true
they fail instead (a CI run that forgot to install them must not look green)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = "tests/test_storage.py::test_advisory_lock_is_exclusive"


def _run(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GA_TEST_BACKEND")}
    env["GA_TEST_PG_BIN"] = str(tmp_path / "no-postgres-here")
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", TARGET, "--backend", "postgresql", "-rs", "-q",
                           "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "t")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_missing_binaries_skip_with_the_install_command(tmp_path: Path) -> None:
    done = _run(tmp_path, ci=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout and "sudo apt-get install postgresql-15" in done.stdout


def test_missing_binaries_fail_under_ci(tmp_path: Path) -> None:
    done = _run(tmp_path, ci=True)
    assert done.returncode == 1 and "CI=true but no PostgreSQL server binaries" in done.stdout
