"""`generalagent-mcp policy`: see why a call would be allowed, asked or denied (never runs it).

    generalagent-mcp policy check --tool run_bash_command --args '{"command": "rm -rf build"}'
    generalagent-mcp policy check --batch < calls.jsonl     # one {"tool": ..., "args": ...} per line
    generalagent-mcp policy show                             # the effective rules and their files
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from foundation.calls import OriginKind
from foundation.errors import InvalidInput
from foundation.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="policy_command", metavar="{check,show}")
    check = sub.add_parser("check", help="Print the decision for a call as JSON (nothing is executed).")
    check.add_argument("--tool", help="Tool name, e.g. run_bash_command.")
    check.add_argument("--args", default="{}", help='Arguments as a JSON object, e.g. \'{"command": "ls"}\'.')
    check.add_argument("--batch", action="store_true",
                       help='Read one {"tool": ..., "args": ...} JSON object per line from stdin.')
    check.add_argument("--read-only", dest="read_only", action="store_true", default=None,
                       help="Treat the tool as read-only (default: its registered annotation).")
    check.add_argument("--not-read-only", dest="read_only", action="store_false",
                       help="Treat the tool as one that changes things.")
    check.add_argument("--origin", choices=["client", "subagent"], default="client")
    check.add_argument("--no-sandbox", dest="sandboxed", action="store_false",
                       help="Decide as when no OS sandbox is available (every shell command asks).")
    sub.add_parser("show", help="Print the effective rules, the rules files and the protected paths.")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from policy import load_rules, user_rules_file

    rules = load_rules(user_rules_file(settings.data_dir, settings.policy_file))
    if args.policy_command == "show":
        return _show(rules, settings)
    if args.policy_command != "check":
        print("usage: generalagent-mcp policy {check,show} (see --help)", file=sys.stderr)
        return 2
    if args.batch:
        return _batch(rules, settings, args)
    if not args.tool:
        raise InvalidInput("policy check needs --tool NAME (or --batch). Example: --tool run_bash_command "
                           '--args \'{"command": "ls"}\'')
    call_args = _json_object(args.args, "--args")
    print(json.dumps(_check(rules, settings, args.tool, call_args, args.read_only, args.origin, args.sandboxed),
                     ensure_ascii=False))
    return 0


ARGS_EXAMPLE = '{"command": "ls"}'
BATCH_EXAMPLE = '{"tool": "run_bash_command", "args": {"command": "ls"}}'


def _json_object(text: str, what: str, example: str = ARGS_EXAMPLE) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{what} is not valid JSON ({exc}). Pass an object like '{example}'.") from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{what} must be a JSON object like '{example}'.")
    return value


def _registered(tool: str) -> Any:
    from mcp_server.registry import TOOLS

    return next((s for s in TOOLS if s.name == tool), None)


def _protected(rules: Any, settings: Settings) -> tuple[Path, ...]:
    """The same protected files the server's approval gate uses (rules, audit log, approvals)."""
    from mcp_server.approval.gate import protected_paths

    return protected_paths(settings)


def _context(rules: Any, settings: Settings, read_only: bool, origin: OriginKind, sandboxed: bool,
             destructive: bool) -> Any:
    """The context the server's gate gathers (but for the approvals waiting: none here)."""
    from mcp_server.approval.judge import changing_tools, protected_names
    from mcp_server.approval.links import git_tops
    from mcp_server.registry import TOOLS
    from policy import PolicyContext

    roots = tuple(Path(r).resolve() for r in settings.roots)
    protected = _protected(rules, settings)
    return PolicyContext(rules=rules, roots=roots, read_only=read_only, protected_paths=protected,
                         protected_names=protected_names(protected), origin=origin, destructive=destructive,
                         changing_tools=changing_tools({s.name: s for s in TOOLS}), sandboxed=sandboxed,
                         git_tops=git_tops(roots))  # as the server's gate finds them


def _check(rules: Any, settings: Settings, tool: str, call_args: dict[str, Any], read_only: bool | None,
           origin: OriginKind, sandboxed: bool = True) -> dict[str, Any]:
    from policy import decide

    registered = _registered(tool)
    effective = read_only if read_only is not None else bool(registered is not None and registered.read_only)
    destructive = registered is not None and registered.destructive
    decision = decide(tool, call_args, _context(rules, settings, effective, origin, sandboxed, destructive))
    return {"tool": tool, **decision.as_dict(), "read_only": effective, "registered": registered is not None}


def _batch(rules: Any, settings: Settings, args: argparse.Namespace) -> int:
    failures = 0
    for number, line in enumerate(sys.stdin, start=1):
        if not line.strip():
            continue
        try:
            item = _json_object(line, f"line {number}", BATCH_EXAMPLE)
            tool, call_args = item.get("tool"), item.get("args", {})
            if not isinstance(tool, str) or not isinstance(call_args, dict):
                raise InvalidInput(f'line {number}: needs "tool" (string) and "args" (object), like \'{BATCH_EXAMPLE}\'.')
            read_only = item.get("read_only", args.read_only)
            origin = item.get("origin", args.origin)
            out = _check(rules, settings, tool, call_args, read_only if isinstance(read_only, bool) else None,
                         origin if origin in ("client", "subagent") else "client", args.sandboxed)
        except InvalidInput as exc:
            failures += 1
            out = {"line": number, "error": str(exc)}
        print(json.dumps(out, ensure_ascii=False), flush=True)
    return 1 if failures else 0


def _show(rules: Any, settings: Settings) -> int:
    from policy import DEFAULT_RULES_FILE, user_rules_file
    from policy.rules import describe

    user = user_rules_file(settings.data_dir, settings.policy_file)
    view = {
        "default_rules": f"policy/{DEFAULT_RULES_FILE} (shipped)",
        "user_rules": str(user) if user else None,
        "user_rules_expected_at": str(settings.policy_file or settings.data_dir / "policy.toml"),
        "roots": [str(Path(r).resolve()) for r in settings.roots] or "(none: the per-session workspace)",
        "protected_paths": [str(p) for p in _protected(rules, settings)],
        **describe(rules),
    }
    print(json.dumps(view, indent=2, ensure_ascii=False))
    return 0
