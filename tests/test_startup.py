"""Start-up stays lean: heavy parts load on first use, but the user's own rules are checked at start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from foundation.errors import SettingsError

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import sys, tempfile
from mcp_server.server import build_server
from foundation.settings import load_settings
build_server(load_settings({"data_dir": tempfile.mkdtemp()}, environ={}))
heavy = ["jieba", "fitz", "pymupdf", "tiktoken", "openai", "docx", "openpyxl", "pptx", "policy",
         "indexing.extract"]
print(",".join(name for name in heavy if name in sys.modules))
"""


def test_building_the_server_imports_no_heavy_library() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_a_broken_user_rules_file_fails_the_start(make_settings: Any, data_dir: Path) -> None:
    from mcp_server.server import build_server

    (data_dir / "policy.toml").write_text("version = 1\n[permissions]\nallow = [\n")
    with pytest.raises(SettingsError, match="policy.toml"):
        build_server(make_settings())


STORES_PROBE = r"""
import sys
from mcp_server.stores import store_kinds
store_kinds()
print(",".join(name for name in ("mcp", "mcp_types", "starlette", "uvicorn") if name in sys.modules))
"""


def test_the_commands_that_list_the_stores_do_not_load_the_sdk() -> None:
    """`doctor`, `migrate`, `export` and `import` list every store; the SDK's import (~1.5 s of CPU here) made
    `doctor` take 3.3 s instead of 1.8."""
    out = subprocess.run([sys.executable, "-c", STORES_PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
