"""Every tool and argument the shipped approval rules name exists in the registered tool signatures
(mcp_server/registry.py TOOLS), so a renamed tool or argument cannot silently switch a rule off."""

from __future__ import annotations

import re

from foundation.toolspec import tool_parameters
from mcp_server.registry import TOOLS
from policy import load_rules
from tools.mcp_servers import SEPARATOR

RULES = load_rules(None)
SIGNATURES = {spec.name: {p.name for p in tool_parameters(spec.fn)} for spec in TOOLS}
ALL_ARGS = set().union(*SIGNATURES.values())


def _tools_matching(pattern: re.Pattern[str]) -> list[str]:
    return [name for name in SIGNATURES if pattern.fullmatch(name)]


def test_permission_rules_name_registered_tools_and_arguments() -> None:
    for rule in RULES.permissions:
        tools = _tools_matching(rule.tool_re)
        if rule.tool_re.fullmatch(f"server{SEPARATOR}tool"):  # other MCP servers' tools: never one of ours
            assert tools == [], f"{rule.rule_id} {rule.text!r} names registered tools too: {tools}"
            continue
        assert tools, f"{rule.rule_id} {rule.text!r} names no registered tool"
        if rule.key is not None:
            assert any(rule.key in SIGNATURES[t] for t in tools), f"{rule.text!r}: no tool has argument {rule.key}"


def test_shell_tools_and_their_command_argument_exist() -> None:
    assert RULES.shell.tools
    for tool, arg in RULES.shell.tools.items():
        assert arg in SIGNATURES.get(tool, set()), f"[shell] tools: {tool}({arg}) is not a registered signature"


def test_write_tools_and_their_path_arguments_exist() -> None:
    assert RULES.write_tools
    for tool, keys in RULES.write_tools.items():
        assert tool in SIGNATURES, f"[files.write_tools] {tool} is not a registered tool"
        for key in keys:
            assert key in SIGNATURES[tool], f"[files.write_tools] {tool} has no argument {key}"


def test_path_keys_are_arguments_of_registered_tools() -> None:
    for key in RULES.path_keys:
        assert key in ALL_ARGS, f"[files] path_keys: no registered tool has an argument {key!r}"


def test_per_tool_patterns_name_registered_tools() -> None:
    for pattern in RULES.patterns:
        for tool_re in pattern.tools:
            assert _tools_matching(tool_re), f"{pattern.rule_id} applies to no registered tool ({tool_re.pattern})"


def test_every_registered_path_argument_is_checked() -> None:
    """The other direction: a tool argument that holds a path is a path key, so secret reads are caught."""
    path_like = {a for a in ALL_ARGS if a in ("path", "paths", "directory") or a.endswith(("_path", "_dir"))}
    assert path_like <= set(RULES.path_keys), path_like - set(RULES.path_keys)
