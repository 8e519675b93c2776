"""`PolicyContext`: everything `decide` may look at besides the call itself, as plain data gathered at the edge
(the gate: `mcp_server/approval/judge.py`; the CLI's `policy check`). The policy does no I/O of its own: what it
needs of the file system, the approvals store or the tool registry arrives here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.calls import OriginKind
from policy.rules import Rules


@dataclass(frozen=True)
class PolicyContext:
    """Everything `decide` may look at besides the call itself."""

    rules: Rules  # loaded once at start-up (defaults + user file), immutable
    roots: tuple[Path, ...]  # workspace roots (resolved); may be empty
    read_only: bool  # the tool's read_only annotation (from its ToolSpec)
    protected_paths: tuple[Path, ...] = ()  # writes to these (files or folders) are denied, and a state-changing
    # call naming one of them (by full path) is refused
    protected_names: tuple[str, ...] = ()  # file names distinctive enough that a state-changing call naming one
    # at all is refused (the approvals store and audit log: "approvals.sqlite3", "audit.jsonl")
    origin: OriginKind = "client"  # who calls: the MCP client or a sub-agent
    destructive: bool = False  # the tool's destructive annotation (from its ToolSpec)
    live_approval_ids: tuple[str, ...] = ()  # approvals waiting for a human (gathered for destructive calls):
    # a destructive call naming one is refused
    changing_tools: frozenset[str] = frozenset()  # the registered tools that change things (not read-only):
    # enabling one asks
    resolved_args: Mapping[str, Any] | None = None  # the call's arguments with the symlinks of its path arguments
    # resolved (found at the edge), when that changes them; the stricter decision of both wins
    sandboxed: bool = True  # shell commands run under an OS sandbox; without one no shell command is auto-allowed
    git_tops: tuple[tuple[Path, Path], ...] = ()  # (root, top of the git work tree above or at it), found at the edge
    real_path: Callable[[str], str] | None = None  # resolves a shell word's symlinks (the gate's: `realpath`);
    # None: shell paths are judged as written
    repo_programs: Callable[[str], tuple[str, ...]] | None = None  # a folder -> the program-valued config keys
    # of the repository git would use there (the gate reads them with git); None: not known
