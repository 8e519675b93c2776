"""The single dispatch point: every tool call, from a client or a sub-agent, passes here.

It checks the call with the approval gate, injects `rt`/`call`, runs sync tools in a
worker thread, times and logs the call, turns exceptions into clear error messages and
bounds the size of the result. Tool bodies never re-implement any of this.
"""

from __future__ import annotations

import inspect
import logging
import time
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any, Protocol

import anyio
import anyio.from_thread
import anyio.to_thread
from pydantic import BaseModel, ValidationError

from mcp_server.bounding import bound_json
from mcp_server.errors import GeneralAgentError, InvalidInput, NotFound
from mcp_server.toolspec import ToolSpec
from tools.runtime import INJECTED_PARAMS, CallContext, Runtime

log = logging.getLogger("generalagent.dispatch")


@dataclass
class CallOrigin:
    """Who is calling: the MCP client, or a sub-agent (with its context id and stack)."""

    kind: str = "client"  # "client" | "subagent"
    client_id: str = "default"
    session_id: str | None = None
    subagent_id: str | None = None
    agent_stack: tuple[str, ...] = ()
    mcp_context: Any = None  # the SDK Context for client calls (elicitation, progress)
    extras: dict[str, Any] = field(default_factory=dict)


class Gate(Protocol):
    """The approval seam: raise PolicyDenied/ApprovalRequired to stop a call, return to let it run."""

    async def check(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> None: ...


class AllowAll:
    async def check(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> None:
        return None


def tool_parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    """The tool's own parameters (injected ones removed), with annotations resolved."""
    hints = typing.get_type_hints(fn, include_extras=True)
    return [
        param.replace(annotation=hints.get(name, param.annotation))
        for name, param in inspect.signature(fn).parameters.items()
        if name not in INJECTED_PARAMS
    ]


def return_model(fn: Callable[..., Any]) -> Any:
    return typing.get_type_hints(fn, include_extras=True).get("return", Any)


class Dispatcher:
    def __init__(self, runtime: Runtime, specs: list[ToolSpec], gate: Gate | None = None) -> None:
        self.runtime = runtime
        self.specs = {spec.name: spec for spec in specs}
        self.gate: Gate = gate or AllowAll()

    def spec(self, name: str) -> ToolSpec:
        try:
            return self.specs[name]
        except KeyError:
            raise NotFound(f"Unknown tool {name!r}. Available: {', '.join(sorted(self.specs))}.") from None

    async def run(
        self, name: str, args: dict[str, Any], origin: CallOrigin, sink: Any = None, validate: bool = False
    ) -> BaseModel:
        """Check, run and time one call; returns the tool's result model or raises GeneralAgentError."""
        spec = self.spec(name)
        if validate:
            args = validate_arguments(spec, args)
        started = time.perf_counter()
        try:
            await self.gate.check(spec, args, origin)
            result = await self._invoke(spec, args, origin, sink)
        except GeneralAgentError as exc:
            log.info("tool %s failed after %.0f ms: %s", name, _ms(started), exc)
            raise
        except ValidationError as exc:
            log.info("tool %s produced invalid data: %s", name, exc)
            raise InvalidInput(f"{name}: invalid value: {_validation_summary(exc)}") from exc
        except Exception as exc:
            log.exception("tool %s crashed after %.0f ms", name, _ms(started))
            raise GeneralAgentError(
                f"Internal error in {name} ({type(exc).__name__}: {exc}). The server is still running; "
                "try different arguments, and report this if it repeats."
            ) from exc
        log.info("tool %s ok in %.0f ms (%s)", name, _ms(started), origin.kind)
        return result

    async def _invoke(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin, sink: Any) -> BaseModel:
        params = inspect.signature(spec.fn).parameters
        kwargs = dict(args)
        call = CallContext(tool=spec.name, client_id=origin.client_id, session_id=origin.session_id, sink=sink)
        call.extras["origin"] = origin
        if "rt" in params:
            kwargs["rt"] = self.runtime
        if "call" in params:
            kwargs["call"] = call
        if inspect.iscoroutinefunction(spec.fn):
            return await _run_async(spec.fn, kwargs, call)  # type: ignore[no-any-return]
        call.portal = anyio.from_thread.run
        return await _run_in_thread(spec.fn, kwargs, call)  # type: ignore[no-any-return]

    def bounded_payload(self, result: BaseModel) -> tuple[dict[str, Any], str]:
        """The structured content and its JSON text, both bounded by the result token limit."""
        return bound_json(result.model_dump(mode="json", by_alias=True), self.runtime.settings.max_result_tokens)


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


def arguments_model(spec: ToolSpec) -> type[BaseModel]:
    """A pydantic model of the tool's own parameters (built once per tool function)."""
    return _arguments_model(spec.fn, spec.name)


@cache
def _arguments_model(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    from pydantic import create_model

    fields: dict[str, Any] = {}
    for param in tool_parameters(fn):
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (param.annotation, default)
    return create_model(f"{name}_args", **fields)


def validate_arguments(spec: ToolSpec, args: dict[str, Any]) -> dict[str, Any]:
    """Validate raw arguments (e.g. from a sub-agent's LLM) against the tool's signature."""
    model = arguments_model(spec)
    fields = model.model_fields
    unknown = sorted(set(args) - set(fields))
    if unknown:
        raise InvalidInput(f"{spec.name}: unknown argument(s) {unknown}. Allowed: {sorted(fields)}.")
    try:
        validated = model(**args)
    except ValidationError as exc:
        raise InvalidInput(f"{spec.name}: {_validation_summary(exc)}") from None
    return {name: getattr(validated, name) for name in fields}


def _validation_summary(exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in exc.errors()[:5]]
    return "; ".join(parts)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
