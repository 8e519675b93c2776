"""The policy gate: every call (client or sub-agent) is decided here before it runs.

deny -> PolicyDenied. allow -> runs. ask -> runs only with a human's consent, given by
  1. a session grant ("approve for this session" earlier in this session), or
  2. an elicitation answer for exactly this call (the entry's resolver asked the client;
     for a sub-agent on a 2025-era parent connection the gate asks through the parent call), or
  3. a granted out-of-band approval (CLI or local HTTP page) that covers this call: exactly this
     call once (default), or the wider scope the human chose there (store.py: today/file/folder/tool).
Otherwise the call is not executed: ApprovalRequired names an approval id and how to approve it.
No argument of the call ever counts as consent. Every decision gets an audit line before the call
runs, but for an allowed call checked on the event loop: its line is written at the loop's next turn
(`_after_the_call`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio.to_thread
from pydantic import BaseModel, Field

from foundation.calls import CallOrigin, Consent
from foundation.command import cli_command
from foundation.errors import ApprovalRequired, PolicyDenied
from foundation.paths import default_workspace
from foundation.settings import USER_RULES_FILENAME, Settings, user_rules_file
from foundation.storage import Database, mask_url, open_database
from foundation.toolspec import ToolSpec
from foundation.waiting import running_on_the_loop
from mcp_server.approval.audit import AUDIT_FILE, AuditLog, AuditSink, audit_log_for, mask_text
from mcp_server.approval.elicit import can_elicit_now
from mcp_server.approval.store import (
    APPROVALS_FILE,
    WIDE_SCOPE_RISKS,
    ApprovalStore,
    call_hash,
    call_target,
    canonical_json,
)
from mcp_server.approval_keys import GRANT_KEY_FILE, KEY_FILE, URL_FILE
from mcp_server.loop_calls import run_on_loop
from mcp_server.transports import is_loopback

if TYPE_CHECKING:  # the policy itself loads on first use (judge.py): building the server does not import it
    from mcp_server.approval.judge import Decide, Judge
    from policy import Decision, Rules

log = logging.getLogger("generalagent.approval")


USER_RULE_PREFIX = "user."
"""Rule ids from the user's own rules file (policy/rules.py: "user.allow[0]"): an allow by one is the user's."""
SHIPPED_RULES = Path(__file__).resolve().parents[2] / "policy" / "default_rules.toml"  # (policy not imported)
MEMO_SIZE = 256  # verdicts kept between a call's elicitation resolver and its check
MEMO_SECONDS = 30.0
INLINE_ARGUMENT_CHARS = 4096
"""A read-only call whose arguments total at most this many characters may be decided on the event loop
(the policy is pure; its cost grows with the arguments): no worker thread just to learn it is allowed."""


def small_arguments(args: dict[str, Any], limit: int = INLINE_ARGUMENT_CHARS) -> bool:
    """True when the arguments' strings, keys and items total at most `limit` (stops counting past it)."""
    total, pending = 0, list(args.values())
    while pending:
        value = pending.pop()
        total += len(value) if isinstance(value, str | dict | list | tuple) else 8
        if total > limit:
            return False
        if isinstance(value, dict):
            pending.extend([*value.keys(), *value.values()])
        elif isinstance(value, list | tuple):
            pending.extend(value)
    return True

SESSION_GRANT_RISKS = WIDE_SCOPE_RISKS
"""Only these risks may be approved "for this session" (or by a wider out-of-band grant); high and critical
ones are asked every time."""


class ApprovalForm(BaseModel):
    """The elicitation form shown to the human for one call."""

    decision: Literal["approve_once", "approve_session", "reject"] = Field(
        title="Your decision",
        description="approve_once: run this call once; approve_session: also allow this kind of call "
        "for the rest of the session; reject: do not run it.",
    )


class ApprovalFormOnce(BaseModel):
    """The form for high-risk calls: no "for this session" choice."""

    decision: Literal["approve_once", "reject"] = Field(
        title="Your decision", description="approve_once: run this call once; reject: do not run it."
    )


def form_for(verdict: Decision) -> type[BaseModel]:
    return ApprovalForm if verdict.risk in SESSION_GRANT_RISKS else ApprovalFormOnce


@dataclass(frozen=True)
class ApprovalAnswer:
    """A human's answer obtained by elicitation, bound to one exact call."""

    choice: str  # approve_once | approve_session | reject | decline | cancel
    call_hash: str
    via: str = "elicitation"


def protected_paths(settings: Settings) -> tuple[Path, ...]:
    """The one list of files no tool may write: the user's rules file(s), the shipped default rules,
    the audit log and the approvals store (with SQLite's side files)."""
    data = settings.data_dir
    paths = [data / USER_RULES_FILENAME, data / AUDIT_FILE, data / APPROVALS_FILE,
             data / (APPROVALS_FILE + "-wal"), data / (APPROVALS_FILE + "-shm"), data / KEY_FILE, data / URL_FILE, data / GRANT_KEY_FILE]
    if settings.policy_file is not None:
        paths.insert(0, settings.policy_file)
    paths.append(SHIPPED_RULES)
    return tuple(dict.fromkeys(Path(os.path.realpath(os.path.expanduser(p))) for p in paths))


def session_key(origin: CallOrigin) -> str:
    """What a session grant is bound to: the client and its server-issued session (stdio: the one client of
    this process), or on sessionless HTTP the grant key the server made (`server.sessionless_grant_key`)."""
    grant_key = origin.grant_key
    return f"{origin.client_id}|{grant_key}" if grant_key else f"{origin.client_id}|{origin.session_id or '-'}"


def describe_origin(origin: CallOrigin) -> str:
    if origin.kind == "subagent":
        return f"subagent:{origin.subagent_id or '?'}"
    return f"client:{origin.client_id}"


def approve_command(settings: Settings, approval_id: str) -> str:
    """The exact terminal command that approves `approval_id` for this server's data dir."""
    return cli_command(settings, "approve", approval_id)


class PolicyGate:
    """Implements dispatch.Gate with the policy engine, approvals and the audit log."""

    def __init__(self, settings: Settings, rules: Rules | None = None, *, decide: Decide | None = None,
                 store: ApprovalStore | None = None, audit: AuditSink | None = None,
                 specs: dict[str, ToolSpec] | None = None, sandboxed: bool = True,
                 database: Callable[[], Database] | None = None) -> None:
        self.settings = settings
        self.sandboxed = sandboxed  # False: no OS sandbox under shell commands, so every one of them asks
        self._memo: OrderedDict[tuple[str, str, str], tuple[float, Decision]] = OrderedDict()
        self._rules, self._decide, self._store, self._audit = rules, decide, store, audit
        self._judge: Judge | None = None  # the policy, loaded on first use (`judge`)
        self._database = database  # the server's (shared with the tools); None: the gate opens its own
        self._lazy = threading.RLock()  # the database, store and audit log, opened on first use
        self._rules_lock = threading.Lock()  # the judge and the verdict memo have their own locks: the event
        self._memo_lock = threading.Lock()  # loop decides small read-only calls and must not wait for a DB open
        self.specs = specs or {}
        self.protected = protected_paths(settings)
        self._configured_roots: tuple[Path, ...] | None = None  # settings.roots resolved, once
        if user_rules_file(settings.data_dir, settings.policy_file) is not None:
            _ = self.rules  # the user's own rules are checked at start-up: a mistake fails the start

    # The shipped rules, the approvals store and the audit log are opened on first use (start-up stays fast).

    @property
    def judge(self) -> Judge:
        """The policy with the loaded rules (the shipped ones and the user's file): what decides each call."""
        with self._rules_lock:
            if self._judge is None:
                from mcp_server.approval import judge  # the one place the gate loads the policy

                rules = self._rules if self._rules is not None else judge.load_rules(
                    user_rules_file(self.settings.data_dir, self.settings.policy_file))
                self._judge = judge.Judge(rules, roots=self.roots, live_ids=lambda: self.store.live_ids(),
                                          protected=self.protected, specs=self.specs, sandboxed=self.sandboxed,
                                          decide=self._decide)
            return self._judge

    @property
    def rules(self) -> Rules:
        return self.judge.rules

    @property
    def database(self) -> Database:
        with self._lazy:
            if self._database is None:
                opened = open_database(self.settings.data_dir, self.settings.database_url)
                self._database = lambda: opened
            return self._database()

    @property
    def store(self) -> ApprovalStore:
        with self._lazy:
            if self._store is None:
                self._store = ApprovalStore(self.database, self.settings.approval_ttl_seconds, self.settings)
            return self._store

    @property
    def audit(self) -> AuditSink:
        with self._lazy:
            if self._audit is None:
                self._audit = audit_log_for(self.database, self.settings.data_dir)
            return self._audit

    @property
    def decides_quickly(self) -> bool:
        """True once the rules and the policy engine are loaded: a verdict then does no IO but `realpath`s
        (the first one loads them, a few tens of ms: not on the event loop)."""
        return self._judge is not None

    def allows_at_once(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> bool:
        """True when this call is allowed and deciding that needed no waiting: a read-only call with small
        arguments once the rules are loaded (the verdict is kept for the call's check)."""
        return (spec.read_only and self.decides_quickly and small_arguments(args)
                and self.verdict_once(spec, args, origin, keep=True).action == "allow")

    def checks_at_once(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> bool:
        """`allows_at_once`, and the check's audit line is an append to the local file (no database):
        the event loop may check and run this call itself."""
        return isinstance(self._audit, AuditLog) and self.allows_at_once(spec, args, origin)

    def warm_up(self) -> None:
        """Load the rules and the policy engine now (start-up warm-up thread; the first call would)."""
        _ = self.judge

    # -- deciding

    def verdict(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> Decision:
        """The policy's decision for this call (a fresh one)."""
        return self.judge.decision(spec, args, origin)

    # One verdict per call: the elicitation resolver (question) decides first and leaves its verdict
    # here for the same call's check; a verdict is used once and only for a few seconds.

    def _remember(self, key: tuple[str, str, str], verdict: Decision) -> None:
        with self._memo_lock:
            self._memo[key] = (time.monotonic(), verdict)
            while len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)

    def verdict_once(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin, keep: bool = False) -> Decision:
        """The verdict already computed for this very call (by its resolver, in any round), else a fresh
        one; `keep` leaves it for the call's check, which uses it up."""
        key = (session_key(origin), origin.kind, call_hash(spec.name, args))  # (the policy reads the origin)
        with self._memo_lock:
            found = self._memo.get(key) if keep else self._memo.pop(key, None)
        if found is not None and time.monotonic() - found[0] < MEMO_SECONDS:
            return found[1]
        verdict = self.judge.decision(spec, args, origin)
        if keep:
            self._remember(key, verdict)
        return verdict

    def roots(self, origin: CallOrigin) -> tuple[Path, ...]:
        """The workspace roots the call may touch (resolved), as the workspace tools compute them."""
        if self.settings.roots:
            if self._configured_roots is None:  # fixed for the server's life, as the settings are
                self._configured_roots = tuple(dict.fromkeys(Path(os.path.realpath(r)) for r in self.settings.roots))
            return self._configured_roots
        try:
            return (_session_workspace(self.settings.data_dir, origin.session_id),)
        except OSError:
            return ()

    def question(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> tuple[str, type[BaseModel]] | None:
        """The elicitation message and form when this call needs a human now, else None."""
        verdict = self.verdict_once(spec, args, origin, keep=True)
        if verdict.action != "ask" or self.store.session_granted(session_key(origin), spec.name,
                                                                 session_scope(spec, args, verdict)):
            return None
        if self.store.has_grant(spec.name, args, call_target(args, self.roots(origin)), verdict.risk):
            return None
        return approval_message(spec.name, args, verdict, scope_text(spec, verdict)), form_for(verdict)

    # -- the Gate protocol

    async def check(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> Consent:
        # Policy analysis, audit masking and approval storage scale with the arguments (a 4 MB
        # write_file): all of it runs in a worker thread, never on the event loop.
        return await anyio.to_thread.run_sync(self.check_blocking, spec, args, origin)

    def check_blocking(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> Consent:
        """`check` from a worker thread (the dispatcher runs a sync tool's check and the tool in one). Returns
        who let the call run: "person" when a person approved it or the user's own allow rule names it,
        "policy" when the shipped policy allowed it (a shell command then runs with read-only roots)."""
        verdict = self.verdict_once(spec, args, origin)
        record = self._recorder(spec, args, verdict, origin)
        if verdict.action == "allow":
            _after_the_call(record)
            return "person" if verdict.rule_id.startswith(USER_RULE_PREFIX) else "policy"
        if verdict.action != "ask":
            record("denied")
            raise PolicyDenied(
                f"Denied by policy ({verdict.rule_id}, {verdict.risk} risk): {verdict.reason} The call was not "
                "executed. Do not retry it; choose another approach or ask the user.")
        self._ask(spec, args, origin, verdict, record)
        return "person"  # (`_ask` returns only when a person approved the call)

    def _ask(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin, verdict: Decision,
                   record: Callable[..., None]) -> None:
        key = session_key(origin)
        scope = session_scope(spec, args, verdict)
        if self.store.session_granted(key, spec.name, scope):
            record("approved", approved_by="session-grant")
            return
        answer = origin.approval_answer
        if answer is None and origin.kind == "subagent":
            answer = run_on_loop(elicit_through, origin.mcp_context, spec, args, verdict)
        if isinstance(answer, ApprovalAnswer) and answer.call_hash == call_hash(spec.name, args):
            if answer.choice == "approve_session" and verdict.risk in SESSION_GRANT_RISKS:
                self.store.grant_session(key, spec.name, scope)
                record("approved", approved_by=answer.via)
                return
            if answer.choice in ("approve_once", "approve_session"):
                record("approved", approved_by=answer.via)
                return
            record("rejected", approved_by=None)
            raise PolicyDenied(
                f"The user did not approve {spec.name} ({answer.choice}). Nothing was executed. Do not retry "
                "it unless the user asks you to.")
        target = call_target(args, self.roots(origin))
        granted = self.store.consume(spec.name, args, target, verdict.risk)
        if granted is not None:
            record("approved", approved_by=granted.approved_by, approval_id=granted.id, scope=granted.scope)
            return
        pending = self.store.request(spec.name, args, risk=verdict.risk, reason=verdict.reason,
                                     rule_id=verdict.rule_id, origin=describe_origin(origin), target=target)
        record("approval_required", approval_id=pending.id)
        raise ApprovalRequired(self._approval_required_text(spec.name, verdict, pending.id, origin))

    def _recorder(self, spec: ToolSpec, args: dict[str, Any], verdict: Decision, origin: CallOrigin) -> Callable[..., None]:
        def record(outcome: str, approved_by: str | None = None, approval_id: str | None = None,
                   scope: str | None = None) -> None:
            try:
                audit = self._audit if self._audit is not None else self.audit  # (no lock once open)
                audit.record(tool=spec.name, args=args, action=verdict.action, rule_id=verdict.rule_id,
                                  risk=verdict.risk, reason=verdict.reason, outcome=outcome,
                                  origin=describe_origin(origin), approved_by=approved_by, approval_id=approval_id,
                                  scope=scope)
            except OSError:
                log.exception("could not write the audit log")

        return record

    def _approval_required_text(self, tool: str, verdict: Decision, approval_id: str, origin: CallOrigin) -> str:
        minutes = max(1, round(self.settings.approval_ttl_seconds / 60))
        lines = [
            f"Approval required: {tool} was NOT executed ({verdict.risk} risk: {verdict.reason} [rule "
            f"{verdict.rule_id}]).",
            f"Approval id: {approval_id} (valid {minutes} min, for exactly this call).",
            "Ask the user to approve it themselves, in a terminal:",
            f"  {approve_command(self.settings, approval_id)}",
        ]
        if self.settings.database_url:
            lines.append(f"  (where GENERALAGENT_DATABASE_URL names the server's database, "
                         f"{mask_url(self.settings.database_url)})")
        # With a bearer token the whole HTTP app (this page too) answers 401 to a browser: no page then.
        page = None if self.settings.http_token else approval_page_url(origin, approval_id)
        if page:
            lines.append(f"or in a browser on this computer: {page} (the page needs its key once: open the "
                         f"address `{approve_command(self.settings, '--list')}` prints)")
        lines.append("After the user has approved, repeat exactly the same call once; changed arguments need a "
                     "new approval. You cannot approve it yourself.")
        return "\n".join(lines)


def _after_the_call(record: Callable[[str], None]) -> None:
    """An allowed call's audit line: written now, or at the event loop's next turn for a call checked on the
    loop (a quick read-only call): after its answer when it runs on the loop, so that the answer does not wait
    for the line's masking and file write (0.1-0.2 ms); while it runs when it moved to a worker thread. The
    line is written outside the call's context (not marked as on the loop: it may wait)."""
    if running_on_the_loop():
        with contextlib.suppress(RuntimeError):  # no loop running: written now
            asyncio.get_running_loop().call_soon(_recorded, record, context=contextvars.Context())
            return
    record("allowed")


def _recorded(record: Callable[[str], None]) -> None:
    try:
        record("allowed")
    except Exception:  # the call has run: its line's failure is the server's to report, not the loop's
        log.exception("could not write the audit line of an allowed call")


def session_scope(spec: ToolSpec, args: dict[str, Any], verdict: Decision) -> str:
    """What "approve for this session" covers: this rule for the tool, or only identical calls for tools
    that can destroy things or reach outside (a session grant must not become a blank cheque)."""
    if spec.destructive or spec.open_world:
        return "call:" + call_hash(spec.name, args)
    return "rule:" + verdict.rule_id


def scope_text(spec: ToolSpec, verdict: Decision) -> str:
    if verdict.risk not in SESSION_GRANT_RISKS:
        return "High risk: asked every time."
    if spec.destructive or spec.open_world:
        return "'approve_session' covers identical calls only."
    return f"'approve_session' covers {spec.name} calls under rule {verdict.rule_id}."


def approval_message(tool: str, args: dict[str, Any], verdict: Decision, scope: str = "") -> str:
    """The human-facing question for one exact call; deterministic (it is re-rendered every round)."""
    shown = canonical_json(args)
    if len(shown) > 1500:
        shown = shown[:1500] + f"... ({len(shown) - 1500} more characters)"
    return (f"Allow the assistant to run {tool}?\n"
            f"Risk: {verdict.risk}. Reason: {mask_text(verdict.reason)} (rule {verdict.rule_id})\n"
            f"Arguments: {shown}\n"
            + (f"{scope}\n" if scope else "")
            + f"Call id: {call_hash(tool, args)[:12]}")


def approval_page_url(origin: CallOrigin, approval_id: str) -> str | None:
    """The local approval page, when this call arrived over HTTP on a loopback host."""
    ctx = origin.mcp_context
    try:
        request = ctx.request_context.request if ctx is not None else None
        base = getattr(request, "base_url", None)
    except Exception:
        return None
    if base is None or not is_loopback(str(base.hostname or "")):
        return None
    return f"{str(base).rstrip('/')}/approvals/{approval_id}"


async def elicit_through(ctx: Any, spec: ToolSpec, args: dict[str, Any], verdict: Decision) -> ApprovalAnswer | None:
    """Ask the human through an in-flight 2025-era call's context (used for sub-agent calls)."""
    if ctx is None or not can_elicit_now(ctx):
        return None
    message = approval_message(spec.name, args, verdict, scope_text(spec, verdict))
    try:
        outcome = await ctx.elicit(f"[sub-agent] {message}", form_for(verdict))
    except Exception:
        log.exception("elicitation through the parent call failed; falling back to an approval id")
        return None
    return answer_from_outcome(outcome, spec.name, args)


def answer_from_outcome(outcome: Any, tool: str, args: dict[str, Any]) -> ApprovalAnswer | None:
    """Turn an SDK elicitation outcome into an answer bound to this call (None: nothing was asked)."""
    action = getattr(outcome, "action", None)
    if action == "accept":
        data = getattr(outcome, "data", None)
        if not isinstance(data, ApprovalForm | ApprovalFormOnce):
            return None
        return ApprovalAnswer(data.decision, call_hash(tool, args))
    if action in ("decline", "cancel"):
        return ApprovalAnswer(str(action), call_hash(tool, args))
    return None


@functools.lru_cache(maxsize=256)
def _session_workspace(data_dir: Path, session_id: str | None) -> Path:
    """The session's default workspace, made once (the gate asks for it on every call)."""
    return default_workspace(data_dir, session_id)
