"""`generalagent-mcp approve <id>`: a human approves (or rejects) one pending tool call.

Shows the exact call (tool and arguments), its risk and reason, then reads a typed answer
from standard input (`y`/`yes` approves; anything else, or end of input, rejects nothing
and leaves it pending). Then the scope (`--scope`, or asked after "y"; Enter or end of input =
this exact call once): once, today, file, folder or tool (see approval/store.py); the scope
is bound to the approved call's tool (and file) and written to the audit log. Only a person at
this terminal (or the local approval page) can grant it, never the model.
`approve --list` lists the pending approvals.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from foundation.settings import Settings

if TYPE_CHECKING:
    from foundation.storage import Database
    from mcp_server.approval.store import Approval, ApprovalStore, Scope

SCOPE_NAMES = ("once", "today", "file", "folder", "tool")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("approval_id", nargs="?", help="The approval id from the tool result (ap-xxxxxx).")
    parser.add_argument("--list", action="store_true", help="List pending approvals.")
    parser.add_argument("--reject", action="store_true", help="Reject the call instead of approving it.")
    parser.add_argument(
        "--scope", choices=SCOPE_NAMES,
        help="What the approval covers: once (this exact call, default), today (this exact call until "
        "midnight), file / folder (this tool on the call's file / its folder, 1 h), tool (any arguments, 10 min).",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    from foundation.storage import open_database
    from mcp_server.approval.store import ApprovalStore

    database = open_database(settings.data_dir, settings.database_url)
    try:
        return _run(args, settings, ApprovalStore(database, settings.approval_ttl_seconds, settings), database)
    finally:
        database.close()


def _run(args: argparse.Namespace, settings: Settings, store: ApprovalStore, database: Database) -> int:
    if args.list or not args.approval_id:
        return _list(store, settings, show_hint=not args.list)
    approval = store.get(args.approval_id)
    _show(approval)
    if approval.status != "pending":
        print(f"\nApproval {approval.id} is already {approval.status}; nothing to do.")
        return 1
    if approval.expired():
        print(f"\nApproval {approval.id} has expired. Ask the assistant to repeat the call for a new id.")
        return 1
    verb = "Reject" if args.reject else "Approve"
    answer = _ask(f"\n{verb} this call? [y/N] ")
    if answer not in ("y", "yes"):
        print("Nothing changed; the call stays pending." if answer is not None else "\nNo answer; nothing changed.")
        return 1
    scope = "once" if args.reject else (args.scope or _ask_scope(approval))
    if scope is None:
        print("Nothing changed; the call stays pending.")
        return 1
    decided = store.decide(approval.id, not args.reject, by="cli", scope=scope)
    _audit(settings, database, decided)
    print(f"Rejected {decided.id}." if args.reject else _approved_text(decided, settings))
    return 0


def _ask_scope(approval: Approval) -> Scope | None:
    """The scope the person picks by number (Enter or end of input: this exact call once)."""
    from mcp_server.approval.store import scope_choices

    choices = scope_choices(approval)
    print("\nApprove for:")
    for number, (_, text) in enumerate(choices, start=1):
        print(f"  {number}) {text}")
    answer = _ask(f"Choose 1-{len(choices)} [1]: ")
    if not answer:
        return "once"
    if answer.isdigit() and 1 <= int(answer) <= len(choices):
        return choices[int(answer) - 1][0]
    print(f"{answer!r} is not one of 1-{len(choices)}.")
    return None


def _approved_text(approval: Approval, settings: Settings) -> str:
    until = time.strftime("%H:%M", time.localtime(approval.expires))
    if approval.scope == "once":
        minutes = max(1, round(settings.approval_ttl_seconds / 60))
        return f"Approved {approval.id}. The assistant may now repeat exactly this call once (within {minutes} min)."
    covered = {
        "today": "exactly this call, any number of times",
        "file": f"{approval.tool} on {approval.scope_path}",
        "folder": f"{approval.tool} on files in {approval.scope_path}/",
        "tool": f"{approval.tool} with any arguments",
    }[approval.scope]
    return f"Approved {approval.id} for {covered}, until {until}."


def _ask(prompt: str) -> str | None:
    print(prompt, end="", flush=True)
    line = sys.stdin.readline()
    return None if line == "" else line.strip().lower()


def _show(approval: Approval) -> None:
    left = max(0, int(approval.expires - time.time()))
    print(f"Approval {approval.id} ({approval.status}, {left // 60} min {left % 60} s left)")
    print(f"Requested by: {approval.origin}")
    print(f"Tool:   {approval.tool}")
    print(f"Risk:   {approval.risk}")
    print(f"Reason: {approval.reason} (rule {approval.rule_id})")
    print("Arguments:")
    for line in approval.pretty_args.splitlines():
        print(f"  {line}")


def _list(store: ApprovalStore, settings: Settings, show_hint: bool) -> int:
    from foundation.command import run_hint
    from mcp_server.approval_keys import remembered_url

    pending = store.pending()
    page = remembered_url(settings.data_dir)
    if page:
        print(f"Approval page (in a browser on this computer): {page}")
    if not pending:
        print("No pending approvals.")
        return 0
    for approval in pending:
        left = max(0, int(approval.expires - time.time()))
        print(f"{approval.id}  {approval.tool}  risk={approval.risk}  {left // 60}m{left % 60:02d}s left  "
              f"({approval.reason})")
    if show_hint:
        print(f"\nApprove one with: {run_hint(settings, 'approve', pending[0].id)}"
              + (" (or another id above)" if len(pending) > 1 else ""))
    return 0


def _audit(settings: Settings, database: Database, approval: Approval) -> None:
    from mcp_server.approval.audit import audit_log_for

    audit_log_for(database, settings.data_dir).record_decision(approval)
