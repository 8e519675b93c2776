"""`generalagent-mcp approve <id>`: a human approves (or rejects) one pending tool call.

Shows the exact call (tool and arguments), its risk and reason, then reads a typed answer
from standard input (`y`/`yes` approves; anything else, or end of input, rejects nothing
and leaves it pending). `approve --list` lists the pending approvals.
"""

from __future__ import annotations

import argparse
import sys
import time

from foundation.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("approval_id", nargs="?", help="The approval id from the tool result (ap-xxxxxx).")
    parser.add_argument("--list", action="store_true", help="List pending approvals.")
    parser.add_argument("--reject", action="store_true", help="Reject the call instead of approving it.")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from mcp_server.approval.store import ApprovalStore

    store = ApprovalStore(settings.data_dir, settings.approval_ttl_seconds)
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
    decided = store.decide(approval.id, not args.reject, by="cli")
    _audit(settings, decided)
    if args.reject:
        print(f"Rejected {decided.id}.")
    else:
        minutes = max(1, round(settings.approval_ttl_seconds / 60))
        print(f"Approved {decided.id}. The assistant may now repeat exactly this call once (within {minutes} min).")
    return 0


def _ask(prompt: str) -> str | None:
    print(prompt, end="", flush=True)
    line = sys.stdin.readline()
    return None if line == "" else line.strip().lower()


def _show(approval: object) -> None:
    from mcp_server.approval.store import Approval

    assert isinstance(approval, Approval)
    left = max(0, int(approval.expires - time.time()))
    print(f"Approval {approval.id} ({approval.status}, {left // 60} min {left % 60} s left)")
    print(f"Requested by: {approval.origin}")
    print(f"Tool:   {approval.tool}")
    print(f"Risk:   {approval.risk}")
    print(f"Reason: {approval.reason} (rule {approval.rule_id})")
    print("Arguments:")
    for line in approval.pretty_args.splitlines():
        print(f"  {line}")


def _list(store: object, settings: Settings, show_hint: bool) -> int:
    from mcp_server.approval.store import ApprovalStore

    assert isinstance(store, ApprovalStore)
    pending = store.pending()
    if not pending:
        print("No pending approvals.")
        return 0
    for approval in pending:
        left = max(0, int(approval.expires - time.time()))
        print(f"{approval.id}  {approval.tool}  risk={approval.risk}  {left // 60}m{left % 60:02d}s left  "
              f"({approval.reason})")
    if show_hint:
        print("\nApprove one with: generalagent-mcp approve <id>")
    return 0


def _audit(settings: Settings, approval: object) -> None:
    from mcp_server.approval.audit import AuditLog
    from mcp_server.approval.store import Approval

    assert isinstance(approval, Approval)
    AuditLog(settings.data_dir).record_decision(approval)
