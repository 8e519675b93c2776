"""The quick loop's list of slow modules (tests/conftest.py) names modules that exist, and a module that
starts the console script or a server is on it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import SLOW_MODULES

TESTS = Path(__file__).resolve().parent
STARTS_A_PROCESS = re.compile(r"\bRawStdioServer\(|\bCONSOLE_SCRIPT\b.*\[|\bserve_http\(|\bstart_http_server\(|"
                              r"\bsubprocess\.Popen\(\[str\(CONSOLE_SCRIPT\)")


def test_every_slow_module_exists() -> None:
    missing = sorted(name for name in SLOW_MODULES if not (TESTS / f"{name}.py").is_file())
    assert not missing, f"tests/conftest.py SLOW_MODULES names modules that are gone: {missing}"


def test_modules_that_start_the_server_are_slow() -> None:
    starting = {path.stem for path in TESTS.glob("test_*.py")
                if STARTS_A_PROCESS.search(path.read_text(encoding="utf-8"))}
    assert starting - SLOW_MODULES == set(), "add these to SLOW_MODULES in tests/conftest.py"


def test_every_listed_slow_test_exists() -> None:
    import ast

    from tests.conftest import slow_tests

    missing = []
    for name in sorted(slow_tests()):
        path, _, function = name.partition("::")
        file = TESTS.parent / path
        defined = file.is_file() and any(
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function
            for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))))
        if not defined:
            missing.append(name)
    assert not missing, f"tests/slow_tests.txt names tests that are gone: {missing}"
