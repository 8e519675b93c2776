"""The single dispatch point: every tool call, from a client or a sub-agent, passes here.

It caps argument sizes at the edge (before any analysis), checks the call with the approval
gate, injects `rt`/`call`, runs sync tools in a worker thread, times and logs the call, turns
exceptions into clear error messages and bounds the size of the result. Tool bodies never
re-implement any of this. Nothing slow runs on the event loop: the gate's policy analysis
runs in a worker thread (mcp_server/approval/gate.py), as do sync tools, so one slow call
cannot delay the others. (For a client that can answer elicitations, the approval resolver decides
a read-only call with small arguments on the loop: the policy is pure and that input is bounded.)
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread
from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from foundation.bounding import MAX_COMMAND_CHARS, bound_json, estimate_tokens
from foundation.calls import CallOrigin, Consent
from foundation.errors import (
    ApprovalRequired,
    GeneralAgentError,
    InvalidInput,
    LimitExceeded,
    NotFound,
    PolicyDenied,
    plain_error,
)
from foundation.paths import MAX_PATH_CHARS
from foundation.toolspec import ToolSpec, validate_arguments, validation_summary
from foundation.waiting import MustWait, on_the_loop
from mcp_server.client_log import asend_to_client, send_to_client
from mcp_server.loop_calls import run_on_loop
from tools.runtime import CallContext, ProgressSink, Runtime

log = logging.getLogger("generalagent.dispatch")
_approval_log = logging.getLogger("generalagent.approval")

PATH_ARGUMENTS = frozenset({"path", "paths", "directory", "images"})
"""Arguments that name workspace paths: capped at MAX_PATH_CHARS bytes each at the edge."""


def arguments_fit(args: dict[str, Any], spec: ToolSpec | None = None) -> bool:
    """False when `check_arguments` refuses the call (the dispatcher then says why, and nobody is asked)."""
    try:
        check_arguments(args, spec)
    except (LimitExceeded, InvalidInput):
        return False
    return True


LONE_SURROGATE = re.compile("[\ud800-\udfff]")
NOT_UNICODE = ("Invalid params: text must be valid Unicode ({where} holds a lone surrogate such as \\ud800, which no "
               "UTF-8 text can); send the text without it.")


def lone_surrogate_in(value: Any, depth: int = 0) -> str | None:
    """Where (an argument's name) a lone UTF-16 surrogate is in `value`'s strings or keys, or None."""
    if isinstance(value, str):  # (an ASCII string, told in O(1), holds none)
        return "a value" if not value.isascii() and LONE_SURROGATE.search(value) else None
    if depth > 64:
        return None
    if isinstance(value, BaseModel):  # a tool's nested argument, validated by the SDK already
        value = dict(value)
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and not key.isascii() and LONE_SURROGATE.search(key):
                return "an argument's name"
            if lone_surrogate_in(item, depth + 1) is not None:
                return repr(key) if depth == 0 and isinstance(key, str) else "a value"
    elif isinstance(value, list | tuple):
        return next((w for w in (lone_surrogate_in(v, depth + 1) for v in value) if w is not None), None)
    return None


def check_arguments(args: dict[str, Any], spec: ToolSpec | None = None) -> None:
    """The checks that run before the approval gate: sizes, then the tool's own `check_args`."""
    check_argument_sizes(args)
    if spec is not None and spec.check_args is not None:
        spec.check_args(args)


def check_argument_sizes(args: dict[str, Any]) -> None:
    """Refuse oversized paths and commands, commands with a NUL byte, and text that is not Unicode (a lone
    surrogate: nothing can encode it, the approval store's hash included), before any analysis or approval
    (cheap: lengths and one scan)."""
    where = lone_surrogate_in(args)
    if where is not None:
        raise InvalidInput(NOT_UNICODE.format(where=where))
    for name, value in args.items():
        if name in PATH_ARGUMENTS:
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str) and (len(item) > MAX_PATH_CHARS or len(item.encode()) > MAX_PATH_CHARS):
                    raise LimitExceeded(f"{name!r} is longer than {MAX_PATH_CHARS:,} bytes; no path is that long. "
                                        "Give a real path inside the workspace.")
        elif name == "command" and isinstance(value, str) and len(value) > MAX_COMMAND_CHARS:
            raise LimitExceeded(f"The command is longer than {MAX_COMMAND_CHARS:,} characters. Write the script to a "
                                "file with write_file and run that file instead.")
        elif name == "command" and isinstance(value, str) and "\x00" in value:
            raise InvalidInput("The command contains a NUL byte, which no shell can run; remove it.")


class Gate(Protocol):
    """The approval seam: each check raises PolicyDenied/ApprovalRequired to stop a call, or returns who let
    it run (`Consent`: the tool sees it as `call.consent`; None counts as "policy").

    `check` is awaited on the event loop (for an async tool); `check_blocking` is the same check from a
    worker thread (a sync tool's call crosses to a worker thread once, for the check and the tool);
    `checks_at_once` is True when `check_blocking` would allow this call without waiting for anything (then
    a quick call, `ToolSpec.quick`, is checked and run on the event loop). `BaseGate` gives the defaults."""

    async def check(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> Consent | None: ...

    def check_blocking(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> Consent | None: ...

    def checks_at_once(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> bool: ...


class BaseGate:
    """A gate from its async `check` alone: `check_blocking` awaits it on the event loop from the worker
    thread, and no call is checked on the loop itself (`checks_at_once` is False)."""

    async def check(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> Consent | None:
        raise NotImplementedError

    def check_blocking(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> Consent | None:
        return run_on_loop(self.check, spec, args, origin)

    def checks_at_once(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> bool:
        return False


class AllowAll(BaseGate):
    """The gate of a dispatcher given none (tests, in-process calls): every call runs, by "policy"."""

    async def check(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> Consent | None:
        return None

    def check_blocking(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> Consent | None:
        return None

    def checks_at_once(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> bool:
        return True


@dataclass(frozen=True)
class _Refused:
    """The gate's refusal, carried out of the worker thread that ran the check (and not the tool)."""

    error: ApprovalRequired | PolicyDenied


class Dispatcher:
    def __init__(self, runtime: Runtime, specs: list[ToolSpec], gate: Gate | None = None) -> None:
        self.runtime = runtime
        self.specs = {spec.name: spec for spec in specs}
        self.gate: Gate = gate or AllowAll()

    @property
    def max_result_tokens(self) -> int:
        return self.runtime.settings.max_result_tokens

    def spec(self, name: str) -> ToolSpec:
        try:
            return self.specs[name]
        except KeyError:
            raise NotFound(f"Unknown tool {name!r}. Available: {', '.join(sorted(self.specs))}.") from None

    async def run(
        self, name: str, args: dict[str, Any], origin: CallOrigin, sink: ProgressSink | None = None, validate: bool = False,
        at_once: bool = False, *, spec: ToolSpec | None = None,
    ) -> BaseModel:
        """Check, run and time one call; returns the tool's result model or raises GeneralAgentError
        (whose message never shows the server's data folder: see `redact_data_dir`). `at_once`: the caller
        has just found `runs_at_once` true for this call (it is not asked again). `spec`: a tool not
        registered here (another MCP server's, for a sub-agent), checked by the same gate."""
        try:
            return await self._run(name, args, origin, sink, validate, at_once, spec)
        except GeneralAgentError as exc:
            if not isinstance(exc, ApprovalRequired):  # its `approve` command is for the human
                exc.args = (redact_data_dir(str(exc), self.runtime.settings.data_dir),)
            raise

    async def _run(
        self, name: str, args: dict[str, Any], origin: CallOrigin, sink: ProgressSink | None = None, validate: bool = False,
        at_once: bool = False, given: ToolSpec | None = None,
    ) -> BaseModel:
        spec = given if given is not None and given.name == name else self.spec(name)
        check_argument_sizes(args)
        if validate:
            args = validate_arguments(spec, args)
        if spec.check_args is not None:  # before the gate: a call that cannot run never asks the human
            spec.check_args(args)
        started = time.perf_counter()
        try:
            result = await self._checked_and_invoked(spec, args, origin, sink, at_once)
        except GeneralAgentError as exc:
            log.info("tool %s failed after %.0f ms: %s", name, _ms(started), exc)
            raise
        except ValidationError as exc:
            log.info("tool %s produced invalid data: %s", name, exc)
            raise InvalidInput(f"{name}: invalid value: {validation_summary(exc)}") from exc
        except Exception as exc:
            plain = plain_error(exc)
            if plain is not None:
                log.warning("tool %s failed after %.0f ms: %s (%s)", name, _ms(started), plain, exc)
                raise plain from exc
            log.exception("tool %s crashed after %.0f ms", name, _ms(started))
            raise GeneralAgentError(
                f"Internal error in {name} ({type(exc).__name__}: {exc}). The server is still running; "
                "try different arguments, and report this if it repeats."
            ) from exc
        # Debug, not info: a line per call on stderr cost 0.1-0.2 ms of a search's time over stdio (formatting
        # and a write while the answer waits); every call is in the audit log, failures are logged above.
        log.debug("tool %s ok in %.0f ms (%s)", name, _ms(started), origin.kind)
        return result

    async def _checked_and_invoked(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin,
                                   sink: ProgressSink | None, at_once: bool = False) -> BaseModel:
        """The gate's check, then the tool. A sync tool runs in the same worker thread as its check (one
        crossing instead of two), or, when the call is quick and the gate allows it at once, on the event
        loop (no crossing); an async tool after the awaited check."""
        if _shape(spec.fn).is_async:
            if spec.precheck is not None:  # a call that would fail never asks the human first
                await anyio.to_thread.run_sync(spec.precheck, self.runtime, origin.session_id, args)
            consent = await _checked_by_gate(self.gate, spec, args, origin)
            return await self._invoke(spec, args, origin, sink, consent or "policy")
        kwargs, call = self._prepared(spec, args, origin, sink)
        checked = False

        def checked_then_run() -> Any:
            nonlocal checked
            if not checked:
                if spec.precheck is not None:  # a call that would fail never asks the human first
                    spec.precheck(self.runtime, call.session_id, args)
                try:
                    call.consent = self.gate.check_blocking(spec, args, origin) or "policy"
                except (ApprovalRequired, PolicyDenied) as exc:
                    return _Refused(exc)
                checked = True
            if call.cancel_event.is_set():  # cancelled while the gate decided: the tool never starts
                return None
            return spec.fn(**kwargs)

        result: Any = MustWait
        if at_once or self.runs_at_once(spec, args, origin):
            with contextlib.suppress(MustWait), on_the_loop():
                result = checked_then_run()
        if result is MustWait:  # not quick, or it met something to wait for: (the rest) in a worker thread
            call.portal = run_on_loop
            result = await _run_in_thread(checked_then_run, {}, call)
        if isinstance(result, _Refused):
            await _announce_refusal(spec, result.error)
            raise result.error
        return result  # type: ignore[no-any-return]

    def runs_at_once(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> bool:
        """True when this call is quick (its tool says so) and the gate allows it without waiting: the
        event loop then checks and runs it itself. Never fails a call, never waits: a test that fails or
        would wait (MustWait: e.g. every read connection busy) says no."""
        if spec.quick is None:
            return False
        try:
            with on_the_loop():
                return spec.quick(self.runtime, args) and self.gate.checks_at_once(spec, args, origin)
        except MustWait:
            return False
        except Exception:
            log.exception("the quick test of %s failed; the call runs in a worker thread", spec.name)
            return False

    async def _invoke(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin, sink: ProgressSink | None,
                      consent: Consent = "policy") -> BaseModel:
        kwargs, call = self._prepared(spec, args, origin, sink)
        call.consent = consent
        if _shape(spec.fn).is_async:
            return await _run_async(spec.fn, kwargs, call)  # type: ignore[no-any-return]
        call.portal = run_on_loop
        return await _run_in_thread(spec.fn, kwargs, call)  # type: ignore[no-any-return]

    def _prepared(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin,
                  sink: ProgressSink | None) -> tuple[dict[str, Any], CallContext]:
        """The tool's keyword arguments (with `rt`/`call` when it takes them) and its CallContext."""
        shape = _shape(spec.fn)
        kwargs = dict(args)
        call = CallContext(tool=spec.name, client_id=origin.client_id, session_id=origin.session_id, sink=sink,
                           origin=origin, log_sink=send_to_client)
        if shape.takes_rt:
            kwargs["rt"] = self.runtime
        if shape.takes_call:
            kwargs["call"] = call
        return kwargs, call

    def bounded_payload(self, result: BaseModel) -> tuple[dict[str, Any], str]:
        """The structured content and its JSON text, both bounded by the result token limit."""
        text = self.bounded_text(result)
        if text is None:
            return self.shrunk_payload(result)
        try:
            return from_json(text), text
        except ValueError:  # nested past pydantic-core's parsing limit (200), not its writing one: the same JSON
            return result.model_dump(mode="json", by_alias=True), text

    def shrunk_payload(self, result: BaseModel) -> tuple[dict[str, Any], str]:
        """`bounded_payload` of a result `bounded_text` found too long: lists and strings shrunk to fit."""
        return bound_json(result.model_dump(mode="json", by_alias=True), self.runtime.settings.max_result_tokens)

    def bounded_text(self, result: BaseModel) -> str | None:
        """The result's JSON text when it fits the result token limit as it is, else None (`bounded_payload`
        shrinks it). Written by pydantic-core in one pass; the structured content is this text parsed."""
        text = result.model_dump_json(by_alias=True)
        return text if estimate_tokens(text) <= self.runtime.settings.max_result_tokens else None


async def _checked_by_gate(gate: Gate, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> Consent | None:
    """The gate's check (who let the call run); a refusal or a pending approval is also an approval event for
    the client's log."""
    try:
        return await gate.check(spec, args, origin)
    except (ApprovalRequired, PolicyDenied) as exc:
        await _announce_refusal(spec, exc)
        raise


async def _announce_refusal(spec: ToolSpec, exc: ApprovalRequired | PolicyDenied) -> None:
    if isinstance(exc, ApprovalRequired):
        await _approval_event("notice", f"{spec.name} needs the user's approval: {str(exc).splitlines()[0][:300]}")
    else:
        await _approval_event("warning", f"{spec.name} was refused by the approval policy: {str(exc)[:300]}")


@dataclass(frozen=True)
class _Shape:
    is_async: bool
    takes_rt: bool
    takes_call: bool


@functools.lru_cache(maxsize=1024)
def _shape(fn: Callable[..., Any]) -> _Shape:
    """What a tool function is (read from its signature once, not per call)."""
    params = inspect.signature(fn).parameters
    return _Shape(inspect.iscoroutinefunction(fn), "rt" in params, "call" in params)


async def _approval_event(level: str, message: str) -> None:
    _approval_log.log(logging.WARNING if level == "warning" else logging.INFO, message)
    await asend_to_client(level, message, "generalagent.approval")


async def _run_async(fn: Callable[..., Awaitable[Any]], kwargs: dict[str, Any], call: CallContext) -> Any:
    try:
        return await fn(**kwargs)
    except anyio.get_cancelled_exc_class():
        call.cancel_event.set()
        raise


async def _run_in_thread(fn: Callable[..., Any], kwargs: dict[str, Any], call: CallContext) -> Any:
    try:
        return await anyio.to_thread.run_sync(partial(fn, **kwargs), abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        call.cancel_event.set()  # the worker sees it at its next check_cancelled()
        raise


def redact_data_dir(message: str, data_dir: Path) -> str:
    """`message` with the data folder's absolute path replaced by "<data dir>" (the per-session
    workspaces in it stay: they are workspace roots the model works in)."""
    for form in dict.fromkeys((os.path.realpath(data_dir), str(data_dir))):
        if form in message:
            message = re.sub(re.escape(form) + r"(?!/workspaces\b)(?=$|[/\s'\")\],:;.])", "<data dir>", message)
    return message


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
