"""The approval gate knows whether shell commands run sandboxed: without a sandbox every one asks."""

from __future__ import annotations

from typing import Any

from mcp_server.server import build_server, shell_sandboxed
from tools.sandbox import sandbox_status


def test_the_gate_gets_the_real_sandbox_status_when_bash_is_enabled(make_settings: Any) -> None:
    settings = make_settings(bash_enabled=True)
    assert shell_sandboxed(settings) is sandbox_status().available
    _, dispatcher = build_server(settings)
    assert dispatcher.gate.sandboxed is sandbox_status().available  # type: ignore[attr-defined]


def test_without_the_shell_tool_nothing_is_probed(make_settings: Any) -> None:
    assert shell_sandboxed(make_settings(bash_enabled=False)) is True
