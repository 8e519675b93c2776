"""Quick tool calls answered by the stdio reader itself, not by the SDK's request pipeline.

On stdio the SDK turns each request into a validated message, a task, a request context, a chain of
middleware, a result model and a response message: about 2 ms a call on 2 cores, as much as a search
itself. A `tools/call` that the server can answer at once skips all that: the reader hands it to the
dispatcher (which checks it with the approval gate, runs it, logs and bounds it, as for any call) and
writes the answer. It is taken here only when all of this holds, else it goes to the SDK unchanged:

- the session is a 2025-era one whose `initialize` the SDK answered, and no `initialize` or
  `logging/setLevel` request is still waiting for its answer;
- the message is a plain JSON-RPC request (id a number or string; params `name`, `arguments` and at
  most a `_meta` holding a `progressToken`: no task or other `_meta` to honour);
- the tool is listed by the server's profile (visible to every session) and quick for these arguments
  (`ToolSpec.quick`), and the gate allows it at once (`Dispatcher.runs_at_once`);
- the arguments pass the registered SDK tool's own checks and validation (else the SDK reports them);
- the skills and agent cards are unchanged (one stat), so no list_changed notification is due.

The answer is built with the SDK's result types and its per-version serializer, as its own pipeline
builds it (tests/test_stdio_fast.py compares the lines both write on random calls and on the edges
below). As in the SDK path: a tool's error or a crash is an isError result; log records the call
forwards while it runs reach the client as `notifications/message` at the session's level (those sent
once it is over are dropped); a `notifications/cancelled` naming a call still running here (7 or "7")
cancels it, with no answer; at the end of input, calls still running get the "Connection closed" error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.shared.dispatcher import coerce_request_id
from mcp_types import (
    CONNECTION_CLOSED,
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
CALL_PARAMS = frozenset({"name", "arguments", "_meta"})
log = logging.getLogger("generalagent.server")
RESOLVED = ("ga_approval", "ga_human")
"""The approval and human-question parameters the SDK fills (never sent by a client)."""


def request_key(request_id: Any) -> str:
    """One spelling of a JSON-RPC id (the key `stdio_pipes._InFlight` uses); "7" and 7 are one id, as the
    SDK correlates them (a cancellation may name either)."""
    return json.dumps(coerce_request_id(request_id))


def plain_request(message: dict[str, Any]) -> bool:
    """A JSON-RPC request the SDK accepts as one: version 2.0, an id that is a number or string, only the
    request's keys, params an object (what the lane takes, and whose answers it waits for)."""
    request_id = message.get("id")
    return (message.get("jsonrpc") == "2.0" and isinstance(request_id, int | str) and not isinstance(request_id, bool)
            and REQUEST_KEYS.issuperset(message) and isinstance(message.get("params", {}), dict))


class QuickCalls:
    """Which client lines are quick calls answered here, and what the session's state allows (module doc)."""

    def __init__(self, server: Any, write: Callable[[str], Awaitable[None]]) -> None:
        self._server, self._write = server, write
        self._dispatcher = server.dispatcher
        self._version: str | None = None  # the session's protocol version, once initialize is answered
        self._client = "default"
        self._level = client_log.DEFAULT_LEVEL
        self._awaited: dict[str, tuple[str, Any]] = {}  # answers that change the session: id -> (what, value)
        self._running: dict[str, asyncio.Task[None]] = {}  # calls not answered yet, by id
        self._tasks: set[asyncio.Task[None]] = set()  # every call's task until it ends (the loop keeps weak ones)
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
        elif method in ("initialize", "logging/setLevel") and plain_request(message):
            self._awaited[request_key(message["id"])] = (method, message.get("params", {}))  # none taken till answered
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
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def _quick_call(self, message: dict[str, Any]) -> tuple[Any, dict[str, Any], CallOrigin, int | str | None] | None:
        """(spec, arguments, origin, progress token) of a call this lane may answer (see the module doc),
        else None."""
        params = message.get("params")
        if (self._version is None or self._awaited or not plain_request(message) or not isinstance(params, dict)
                or not CALL_PARAMS.issuperset(params)):
            return None
        token = _progress_token(params)
        if token is False:
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
        return (spec, validated, origin, token) if self._dispatcher.runs_at_once(spec, validated, origin) else None

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

    async def _answer(self, request_id: int | str, spec: Any, args: dict[str, Any], origin: CallOrigin,
                      token: int | str | None) -> None:
        outcome = await self._outcome(spec, args, origin, token)
        try:
            assert self._version is not None
            wire = sdk_methods.serialize_server_result("tools/call", self._version,
                                                       outcome.model_dump(by_alias=True, mode="json", exclude_none=True))
            message: JSONRPCResponse | JSONRPCError = JSONRPCResponse(jsonrpc="2.0", id=request_id, result=wire)
        except Exception:  # as the SDK answers a result its serializer refuses
            log.exception("the quick call %s returned an invalid result", spec.name)
            message = JSONRPCError(jsonrpc="2.0", id=request_id,
                                   error=ErrorData(code=INTERNAL_ERROR, message="Handler returned an invalid result"))
        self._running.pop(request_key(request_id), None)  # answered: nothing to cancel or close any more
        await self._write(_line(message))

    async def _outcome(self, spec: Any, args: dict[str, Any], origin: CallOrigin,
                       token: int | str | None) -> CallToolResult:
        """The call's result as the SDK's tool wrapper words it (a tool's error, or a crash: isError)."""
        dispatcher = self._dispatcher
        notices = _Notices(self._write, token)
        try:
            with client_log.forwarding_to(_LineLog(notices, self._level)):
                result = await dispatcher.run(spec.name, args, origin, sink=notices.progress)
            data, text = dispatcher.bounded_payload(result)
            return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)
        except GeneralAgentError as exc:
            return _failed(f"Error executing tool {spec.name}: {exc}")
        except Exception:  # a crash: its text stays in the server's log
            log.exception("the quick call %s crashed", spec.name)
            return _failed(f"Error executing tool {spec.name}")
        finally:  # as in the SDK path: a record or progress sent once the call is over is dropped
            notices.closed = True

    async def close(self) -> None:
        """At the end of input: the calls still running are cancelled and answered as the SDK answers its own
        then (connection closed)."""
        for key, task in list(self._running.items()):
            task.cancel()
            await self._write(_line(JSONRPCError(jsonrpc="2.0", id=json.loads(key),
                                                 error=ErrorData(code=CONNECTION_CLOSED, message="Connection closed"))))

    def _cancel(self, params: Any) -> None:
        if isinstance(params, dict) and isinstance(params.get("requestId"), int | str):
            key = request_key(params["requestId"])
            self._awaited.pop(key, None)  # a cancelled request gets no answer to wait for
            task = self._running.pop(key, None)
            if task is not None:
                task.cancel()


def _failed(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _line(message: JSONRPCResponse | JSONRPCError | JSONRPCNotification) -> str:
    """A message as the SDK's stdio writer puts it on the wire."""
    return message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"


def _progress_token(params: dict[str, Any]) -> int | str | None | bool:
    """The call's progress token (None: none asked); False when `_meta` holds anything else."""
    meta = params.get("_meta")
    if meta is None:
        return None
    if not isinstance(meta, dict) or set(meta) != {"progressToken"}:
        return False
    token = meta["progressToken"]
    return token if isinstance(token, int | str) and not isinstance(token, bool) else False


class _Notices:
    """What one quick call sends besides its answer, as the SDK's request context sends it: progress with
    the call's token (none without one), log records (`_LineLog`); nothing once the call is over."""

    def __init__(self, write: Callable[[str], Awaitable[None]], token: int | str | None) -> None:
        self._write, self._token = write, token
        self.closed = False

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if not self.closed:
            await self._write(_line(JSONRPCNotification(jsonrpc="2.0", method=method, params=params)))

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """The call's progress sink (CallContext.sink)."""
        if self._token is None:
            return
        params: dict[str, Any] = {"progressToken": self._token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)


class _LineLog(client_log.ClientLog):
    """A quick call's forwarded log records: `notifications/message` at the session's level."""

    def __init__(self, notices: _Notices, threshold: str) -> None:
        super().__init__(ctx=None, threshold=threshold)
        self._notices = notices

    async def send(self, level: str, data: Any, logger: str) -> None:
        with contextlib.suppress(Exception):  # best effort, as ClientLog.send
            await self._notices.notify("notifications/message", {"level": level, "logger": logger, "data": data})
