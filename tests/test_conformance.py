"""The official MCP conformance suite against our Streamable HTTP server.

`scripts/node.sh` installs the pinned Node 22 and `@modelcontextprotocol/conformance` into
.cache/ (once); when that is impossible (npm registry unreachable) this test FAILS with the
reason: CI must never pass silently without running the suite. Scenarios that need the
reference fixture server are listed in tests/conformance/expected-failures.yml.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_http import HttpServer, start_http_server

ROOT = Path(__file__).resolve().parents[1]
NODE_SH = ROOT / "scripts" / "node.sh"
BASELINE = ROOT / "tests" / "conformance" / "expected-failures.yml"
RESULT_DIR = re.compile(r"^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
MUST_PASS = (
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "prompts-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
)

# one pytest-xdist worker runs this module (--dist loadgroup), so its module-scoped server starts once
pytestmark = pytest.mark.xdist_group("test_conformance")


def ensure_node_tools() -> None:
    """Install the pinned Node tooling (cached); fail the test with npm's reason if impossible."""
    try:
        done = subprocess.run([str(NODE_SH)], capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail("scripts/node.sh did not finish installing Node 22 and the MCP tools within 10 minutes")
    if done.returncode != 0:
        pytest.fail(f"scripts/node.sh could not install the pinned Node tooling:\n{done.stderr[-3000:]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    ensure_node_tools()
    srv = start_http_server(tmp_path_factory.mktemp("conformance-server"))
    yield srv
    srv.stop()


def scenario_results(output_dir: Path) -> dict[str, tuple[int, int]]:
    """{scenario: (passed checks, failed checks)} from the suite's checks.json files."""
    results: dict[str, tuple[int, int]] = {}
    for checks_file in sorted(output_dir.glob("*/checks.json")):
        checks = json.loads(checks_file.read_text())
        match = RESULT_DIR.match(checks_file.parent.name)
        if match is None:
            continue
        scenario = match.group(1)
        failed = sum(1 for c in checks if c.get("status") == "FAILURE")
        passed = sum(1 for c in checks if c.get("status") == "SUCCESS")
        results[scenario] = (passed, failed)
    return results


def test_conformance_suite(server: HttpServer, tmp_path: Path) -> None:
    output = tmp_path / "results"
    command = [str(NODE_SH), "conformance", "server", "--url", server.url,
               "--expected-failures", str(BASELINE), "-o", str(output)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          stdin=subprocess.DEVNULL)
    report = done.stdout[-6000:] + done.stderr[-2000:]
    results = scenario_results(output)
    assert results, f"the conformance suite produced no results:\n{report}"
    for scenario in MUST_PASS:
        assert scenario in results, f"{scenario} did not run:\n{report}"
        passed, failed = results[scenario]
        assert failed == 0 and passed > 0, f"{scenario}: {passed} passed, {failed} failed\n{report}"
    assert done.returncode == 0, f"unexpected failures or stale baseline entries:\n{report}"
    passing = sorted(name for name, (_, failed) in results.items() if failed == 0)
    checks_passed = sum(passed for passed, _ in results.values())
    checks_failed = sum(failed for _, failed in results.values())
    print(f"\nconformance: {len(passing)}/{len(results)} scenarios passed ({', '.join(passing)}); "
          f"{len(results) - len(passing)} expected failures (fixture scenarios); "
          f"checks {checks_passed} passed, {checks_failed} failed")


def test_unreachable_npm_registry_fails_loudly(tmp_path: Path) -> None:
    """Without the registry (here: a closed loopback port) node.sh must fail and say why, never pass."""
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith("npm_config_")}
    env.update(GENERALAGENT_NODE_CACHE=str(tmp_path / "node-cache"), npm_config_registry="http://127.0.0.1:9/",
               npm_config_cache=str(tmp_path / "npm-cache"))
    done = subprocess.run([str(NODE_SH), "conformance", "--version"], capture_output=True, text=True, timeout=240,
                          env=env, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert "cannot install" in done.stderr and "npm registry" in done.stderr
    assert not (tmp_path / "node-cache").exists()
