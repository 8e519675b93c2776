"""Quick tool calls answered by the stdio reader itself, not by the SDK's request pipeline.

On stdio the SDK turns each request into a validated message, a task, a request context, a chain of
middleware, a result model and a response message: about 2 ms a call on 2 cores, as much as a search
itself. A `tools/call` that the server can answer at once skips all that: the reader hands it to the
dispatcher (which checks it with the approval gate, runs it, logs and bounds it, as for any call) and
writes the answer. It is taken here only when all of this holds, else it goes to the SDK unchanged:

- the session is a 2025-era one whose `initialize` the SDK answered, and no `initialize` or
  `logging/setLevel` request is still waiting for its answer;
- the message is a plain JSON-RPC request (id a number or string; params `name` and `arguments`
  only, so no progress token, task or other `_meta` to honour);
- the tool is listed by the server's profile (visible to every session) and quick for these arguments
  (`ToolSpec.quick`), and the gate allows it at once (`Dispatcher.runs_at_once`);
- the arguments pass the registered SDK tool's own checks and validation (else the SDK reports them);
- the skills and agent cards are unchanged (one stat), so no list_changed notification is due.

The answer is built with the SDK's result types and its per-version serializer, as its own pipeline
builds it (tests/test_stdio_fast.py compares the lines both write on random calls). Log records the
call forwards reach the client as `notifications/message` at the session's level, as in the SDK path.
A `notifications/cancelled` for a call still running here cancels it; it then gets no answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_types import (
    INTERNAL_ERROR,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCResponse,
    TextContent,
)
from mcp_types import methods as sdk_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from foundation.calls import CallOrigin
from foundation.errors import GeneralAgentError
from mcp_server import client_log

REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
CALL_PARAMS = frozenset({"name", "arguments"})
log = logging.getLogger("generalagent.server")
RESOLVED = ("ga_approval", "ga_human")
"""The approval and human-question parameters the SDK fills (never sent by a client)."""


def request_key(request_id: Any) -> str:
    """One spelling of a JSON-RPC id (the key `stdio_pipes._InFlight` uses)."""
    return json.dumps(request_id)


class QuickCalls:
    """Which client lines are quick calls answered here, and what the session's state allows (module doc)."""

    def __init__(self, server: Any, write: Callable[[str], Awaitable[None]]) -> None:
        self._server, self._write = server, write
        self._dispatcher = server.dispatcher
        self._version: str | None = None  # the session's protocol version, once initialize is answered
        self._client = "default"
        self._level = client_log.DEFAULT_LEVEL
        self._awaited: dict[str, tuple[str, Any]] = {}  # answers that change the session: id -> (what, value)
        self._running: dict[str, asyncio.Task[None]] = {}
        self.taken = 0  # calls answered here

    def read(self, message: Any) -> bool:
        """Note what a client message changes; True when it is a quick call taken here (not for the SDK)."""
        if not isinstance(message, dict):
            return False
        method = message.get("method")
        if method == "tools/call":
            return self._take(message)
        if method == "notifications/cancelled":
            self._cancel(message.get("params"))
        elif method in ("initialize", "logging/setLevel") and "id" in message:
            params = message.get("params") if isinstance(message.get("params"), dict) else {}
            self._awaited[request_key(message["id"])] = (method, params)  # no call is taken until answered
        return False

    def answered(self, key: str, text: str) -> None:
        """The SDK wrote the answer to request `key`: an initialize or setLevel result changes the session."""
        awaited = self._awaited.pop(key, None)
        if awaited is None:
            return
        result = json.loads(text).get("result")
        if not isinstance(result, dict):
            return  # an error: nothing changed
        method, params = awaited
        if method == "logging/setLevel":
            self._level = str(params.get("level", self._level))
            return
        version = result.get("protocolVersion")
        if isinstance(version, str) and version not in MODERN_PROTOCOL_VERSIONS:
            info = params.get("clientInfo")
            name = info.get("name") if isinstance(info, dict) else None
            self._client = name if isinstance(name, str) and name else "default"
            self._version = version

    def _take(self, message: dict[str, Any]) -> bool:
        call = self._quick_call(message)
        if call is None:
            return False
        self.taken += 1
        key = request_key(message["id"])
        log.debug("%s (id %s) is answered by the stdio reader", call[0].name, key)
        task = asyncio.get_running_loop().create_task(self._answer(message["id"], *call))
        self._running[key] = task
        task.add_done_callback(lambda _: self._running.pop(key, None))
        return True

    def _quick_call(self, message: dict[str, Any]) -> tuple[Any, dict[str, Any], CallOrigin] | None:
        """(spec, arguments, origin) of a call this lane may answer (see the module doc), else None."""
        params = message.get("params")
        request_id = message.get("id")
        if (self._version is None or self._awaited or not REQUEST_KEYS.issuperset(message)
                or message.get("jsonrpc") != "2.0" or isinstance(request_id, bool)
                or not isinstance(request_id, int | str) or not isinstance(params, dict)
                or not CALL_PARAMS.issuperset(params)):
            return None
        name, arguments = params.get("name"), params.get("arguments") or {}
        spec = self._dispatcher.specs.get(name) if isinstance(name, str) else None
        if (spec is None or spec.quick is None or name not in self._server.listed_by_profile
                or not isinstance(arguments, dict) or not self._server.prompt_sync.unchanged()):
            return None
        validated = self._validated(spec.name, arguments)
        if validated is None:
            return None
        origin = CallOrigin(kind="client", client_id=self._client, session_id=None)
        return (spec, validated, origin) if self._dispatcher.runs_at_once(spec, validated, origin) else None

    def _validated(self, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """The arguments as the registered SDK tool checks and validates them (None: the SDK reports why)."""
        tool = self._server._tool_manager.get_tool(name)
        checked = getattr(tool, "checked", None)
        if checked is None:
            return None
        try:
            validated: dict[str, Any] = tool.fn_metadata.validate_arguments(checked(arguments))
        except Exception:  # ToolError (an unknown argument) or ValidationError: the SDK words it
            return None
        return {key: value for key, value in validated.items() if key not in RESOLVED}

    async def _answer(self, request_id: int | str, spec: Any, args: dict[str, Any], origin: CallOrigin) -> None:
        try:
            line = await self._result_line(request_id, spec, args, origin)
        except Exception:  # a bug of ours: the client still gets an answer (the SDK's for a handler crash)
            log.exception("the quick call %s failed outside the tool", spec.name)
            failed = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=INTERNAL_ERROR, message="Internal error"))
            line = failed.model_dump_json(by_alias=True, exclude_unset=True)
        await self._write(line + "\n")

    async def _result_line(self, request_id: int | str, spec: Any, args: dict[str, Any], origin: CallOrigin) -> str:
        dispatcher = self._dispatcher
        try:
            with client_log.forwarding_to(_LineLog(self._write, self._level)):
                result = await dispatcher.run(spec.name, args, origin)
            data, text = dispatcher.bounded_payload(result)
            outcome = CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)
        except GeneralAgentError as exc:  # as the SDK words a tool's ToolError
            outcome = CallToolResult(content=[TextContent(type="text", text=f"Error executing tool {spec.name}: {exc}")],
                                     is_error=True)
        assert self._version is not None
        wire = sdk_methods.serialize_server_result("tools/call", self._version,
                                                   outcome.model_dump(by_alias=True, mode="json", exclude_none=True))
        return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=wire).model_dump_json(by_alias=True,
                                                                                            exclude_unset=True)

    def _cancel(self, params: Any) -> None:
        if isinstance(params, dict) and "requestId" in params:
            task = self._running.get(request_key(params["requestId"]))
            if task is not None:
                task.cancel()


class _LineLog(client_log.ClientLog):
    """A quick call's forwarded log records: `notifications/message` lines at the session's level."""

    def __init__(self, write: Callable[[str], Awaitable[None]], threshold: str) -> None:
        super().__init__(ctx=None, threshold=threshold)
        self._write_line = write

    async def send(self, level: str, data: Any, logger: str) -> None:
        note = JSONRPCNotification(jsonrpc="2.0", method="notifications/message",
                                   params={"level": level, "logger": logger, "data": data})
        await self._write_line(note.model_dump_json(by_alias=True, exclude_unset=True) + "\n")
