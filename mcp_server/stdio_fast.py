"""Quick tool calls answered by the stdio reader itself, not by the SDK's request pipeline.

On stdio the SDK turns each request into a validated message, a task, a request context, a chain of
middleware, a result model and a response message: about 2 ms a call on 2 cores, as much as a search
itself. A `tools/call` that the server can answer at once skips all that: the reader hands it to the
dispatcher (which checks it with the approval gate, runs it, logs and bounds it, as for any call) and
writes the answer. It is taken here only when all of this holds, else it goes to the SDK unchanged:

- the line parses as the SDK's transport parses it (pydantic-core's JSON, `stdio_pipes._parsed`);
- the SDK has settled the session's era, no `initialize` or `logging/setLevel` request is still
  waiting for its answer, and none ever shared its id with another request in flight. 2025 era: the
  SDK answered `initialize` with a 2025 version. 2026-07-28 era: the SDK answered a request with a
  2026-era result (the serverInfo stamp it puts on those only);
- the message is a plain JSON-RPC request (id a number or string; params `name`, `arguments` and a
  `_meta` with nothing to honour beyond what the lane does): 2025 era, at most a `progressToken`;
  2026-07-28, the request's envelope (protocol version, client info and capabilities, log level
  opt-in, progress token) that the SDK's own ladder and its per-version params model accept;
- the tool is listed by the server's profile (visible to every session) and quick for these arguments
  (`ToolSpec.quick`), and the gate allows it at once (`Dispatcher.runs_at_once`);
- the arguments pass the registered SDK tool's own checks and validation (else the SDK reports them);
- the skills and agent cards are unchanged (one stat), so no list_changed notification is due.

The answer is built with the SDK's result types and its own serializer (per version; the 2026 era's
resultType and serverInfo stamp), as its pipeline builds it, but for its variable parts: stand-ins for the
request id, the text and the structured content are shaped once per protocol version and each answer's
JSON spliced into that line (`_Template`); any other answer is shaped on its own (`QuickCalls._shaped`).
tests/test_stdio_fast.py compares the lines both write on random calls, in both eras, and on the edges below. As in the SDK path: a tool's
error or a crash is an isError result; log records the call forwards while it runs reach the client as
`notifications/message` at the session's level (2025) or at the request's opt-in (2026-07-28; none
without one), and those sent once it is over are dropped; a `notifications/cancelled` naming a call
still running here (7 or "7") cancels it, with no answer; at the end of input, calls still running get
the "Connection closed" error; an answer the SDK's shaping fails on gets the error its dispatcher
would send. Reading a call never stops the reader: whatever fails there leaves the call to the SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import re
from collections.abc import Awaitable, Callable, Collection, Mapping
from types import MappingProxyType
from typing import Any

from mcp.server.connection import Connection, allowed_log_levels
from mcp.server.runner import ServerRunner, modern_error_data
from mcp.shared.dispatcher import as_request_id, coerce_request_id
from mcp.shared.inbound import InboundModernRoute, classify_inbound_request
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    CONNECTION_CLOSED,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCResponse,
    TextContent,
)
from mcp_types import methods as sdk_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic_core import from_json, to_json

from foundation.calls import CallOrigin
from foundation.errors import GeneralAgentError
from mcp_server import client_log

REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
CALL_PARAMS = frozenset({"name", "arguments", "_meta"})
ENVELOPE_KEYS = frozenset({PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY,
                           LOG_LEVEL_META_KEY, "progressToken"})
"""The `_meta` keys of a 2026-07-28 call the lane honours (any other: the SDK's pipeline takes it)."""
ENVELOPES_KEPT, ENVELOPE_KEY_MAX = 64, 4096
"""Envelopes (clients, protocol versions) remembered as the SDK reads them, each at most this long as JSON;
more: forgotten, read again (a longer one: read on every call)."""
STAND_IN: Mapping[str, Any] = MappingProxyType({"\x00generalagent: structured content": 0})
"""Shaped in place of an answer's structured content (`_Template`)."""
STAND_IN_JSON = json.dumps(dict(STAND_IN), separators=(",", ":"))
"""Its JSON text in a line: found in no JSON string (their quotes are escaped) and in no key the SDK writes."""
TEXT_STAND_IN, ID_STAND_IN = "\x00generalagent: text", "\x00generalagent: id"
"""Shaped in place of an answer's text and its request id in the line kept per protocol version (`_Template`)."""
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
    return (message.get("jsonrpc") == "2.0" and as_request_id(message.get("id")) is not None
            and REQUEST_KEYS.issuperset(message) and isinstance(message.get("params", {}), dict))


@dataclasses.dataclass(frozen=True)
class _Envelope:
    """What one call carries besides its tool and arguments: the protocol version it is answered at, the
    calling client's name, the log levels it receives, and its progress token (None: none asked)."""

    version: str
    client: str
    log_levels: frozenset[str]
    token: int | str | None


class QuickCalls:
    """Which client lines are quick calls answered here, and what the session's state allows (module doc)."""

    def __init__(self, server: Any, write: Callable[[str], Awaitable[None]], in_flight: Collection[str] = ()) -> None:
        """`in_flight`: the keys of the requests read and not answered yet (`stdio_pipes._InFlight.ids`), as
        they stand when a message is given to `read`, before it is counted."""
        self._server, self._write, self._in_flight = server, write, in_flight
        self._dispatcher = server.dispatcher
        self._serializer = ServerRunner(server._lowlevel_server, connection=None, lifespan_state=None)  # type: ignore[arg-type]
        self._version: str | None = None  # a 2025-era session's version, once initialize is answered
        self._modern = False  # a 2026-07-28 session, once the SDK answered a request in that era
        self._client = "default"
        self._log_levels = _at_or_above(client_log.DEFAULT_LEVEL)  # a 2025 session's, as setLevel chose
        self._envelopes: dict[str, _Envelope | None] = {}  # a 2026-era `_meta` (no progress token) as read
        self._templates: dict[str, _Template | None] = {}  # an answer's line per protocol version (None: none)
        self._awaited: dict[str, tuple[str, Any]] = {}  # answers that change the session: id -> (what, value)
        self._unsure = False  # a session-changing request shared its id with another one: which answer is whose?
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
            key = request_key(message["id"])
            self._unsure |= key in self._awaited or key in self._in_flight  # the lane stays off for good
            self._awaited[key] = (method, message.get("params", {}))  # none taken till answered
        return False

    def answered(self, key: str, text: str) -> None:
        """The SDK wrote the answer to request `key`: an initialize or setLevel result changes the session,
        and the first 2026-era result settles that era."""
        awaited = self._awaited.pop(key, None)
        if awaited is None and (self._modern or self._version is not None):
            return
        try:
            answer = json.loads(text)
        except (ValueError, RecursionError):  # not ours to judge: the SDK wrote it
            return
        result = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(result, dict):
            return  # an error: nothing changed
        if awaited is None:
            meta = result.get("_meta")
            self._modern = "resultType" in result and isinstance(meta, dict) and SERVER_INFO_META_KEY in meta
            return
        method, params = awaited
        if method == "logging/setLevel":
            level = params.get("level") if isinstance(params, dict) else None
            self._log_levels = _at_or_above(level) if level in client_log.LEVELS else self._log_levels
            return
        version = result.get("protocolVersion")
        if isinstance(version, str) and not self._modern:
            info = params.get("clientInfo")
            name = info.get("name") if isinstance(info, dict) else None
            self._client = name if isinstance(name, str) and name else "default"
            self._version = version

    def _take(self, message: dict[str, Any]) -> bool:
        try:
            call = self._quick_call(message)
        except Exception:  # e.g. a `_meta` nested too deep to encode: the SDK answers it (the reader goes on)
            log.debug("a tools/call the lane could not read goes to the SDK", exc_info=True)
            return False
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

    def _quick_call(self, message: dict[str, Any]) -> tuple[Any, dict[str, Any], CallOrigin, _Envelope] | None:
        """(spec, arguments, origin, envelope) of a call this lane may answer (see the module doc), else None."""
        params = message.get("params")
        if (self._awaited or self._unsure or not plain_request(message) or not isinstance(params, dict)
                or not CALL_PARAMS.issuperset(params)):
            return None
        envelope = self._modern_envelope(params) if self._modern else self._session_envelope(params.get("_meta"))
        if envelope is None:
            return None
        name, arguments = params.get("name"), params.get("arguments")
        arguments = {} if arguments is None else arguments  # absent or null: none (any other non-object: the SDK)
        spec = self._dispatcher.specs.get(name) if isinstance(name, str) else None
        if (spec is None or spec.quick is None or name not in self._server.listed_by_profile
                or not isinstance(arguments, dict) or not self._server.prompt_sync.unchanged()):
            return None
        validated = self._validated(spec.name, arguments)
        if validated is None:
            return None
        origin = CallOrigin(kind="client", client_id=envelope.client, session_id=self._server.stdio_session)
        return (spec, validated, origin, envelope) if self._dispatcher.runs_at_once(spec, validated, origin) else None

    def _session_envelope(self, meta: Any) -> _Envelope | None:
        """A 2025-era call's envelope: the session's (its `_meta` may hold a progress token, nothing else)."""
        if self._version is None or (meta is not None and (not isinstance(meta, dict) or set(meta) != {"progressToken"})):
            return None
        token = _token(meta)
        if token is False:
            return None
        return _Envelope(self._version, self._client, self._log_levels, token)

    def _modern_envelope(self, params: dict[str, Any]) -> _Envelope | None:
        """A 2026-07-28 call's envelope, read as the SDK reads it (None when its ladder or params model would
        refuse the call, or `_meta` holds more than the lane honours). A client sends the same envelope on
        every call (but for its progress token): what the SDK makes of one is kept (ENVELOPES_KEPT)."""
        meta = params.get("_meta")
        if not isinstance(meta, dict) or not ENVELOPE_KEYS.issuperset(meta):
            return None
        token = _token(meta)
        if token is False:
            return None
        envelope = {name: value for name, value in meta.items() if name != "progressToken"}
        key = json.dumps(envelope, sort_keys=True)
        found = self._envelopes[key] if key in self._envelopes else _read_envelope(envelope)
        if key not in self._envelopes and len(key) <= ENVELOPE_KEY_MAX:
            if len(self._envelopes) >= ENVELOPES_KEPT:
                self._envelopes.clear()
            self._envelopes[key] = found
        return None if found is None else dataclasses.replace(found, token=token)

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
                      envelope: _Envelope) -> None:
        outcome, structured_text = await self._outcome(spec, args, origin, envelope)
        line = self._templated(request_id, envelope.version, outcome, structured_text)
        if line is None:
            line = self._shaped(request_id, envelope.version, outcome, structured_text)
        self._running.pop(request_key(request_id), None)  # answered: nothing to cancel or close any more
        await self._write(line)

    def _templated(self, request_id: int | str, version: str, outcome: CallToolResult,
                   structured_text: str | None) -> str | None:
        """A plain answer's line (its text and structured content: the same JSON) filled into the line the SDK
        shapes for stand-ins at this version, kept once shaped; None for any other answer, or when the shaping
        does not carry the stand-ins through (then `_shaped` shapes it)."""
        if (structured_text is None or type(request_id) not in (int, str)
                or outcome != CallToolResult(content=[_plain_text(structured_text)])):
            return None
        if version not in self._templates:
            self._templates[version] = _Template.shaped(self._serializer, version)
        template = self._templates[version]
        return None if template is None else template.filled(request_id, structured_text)

    def _shaped(self, request_id: int | str, version: str, outcome: CallToolResult, structured_text: str | None) -> str:
        """The answer's line as the SDK shapes it (per-version sieve, cache hint, resultType and serverInfo stamp
        in 2026; a result it cannot shape: its error), with `structured_text` (JSON) as its structured content:
        an answer `_templated` does not fill (an error, or a shaping that does not carry its stand-ins through)."""
        try:
            if structured_text is not None:
                outcome = outcome.model_copy(update={"structured_content": from_json(structured_text)})
            wire = self._serializer._serialize("tools/call", version, outcome)
            message: JSONRPCResponse | JSONRPCError = JSONRPCResponse(jsonrpc="2.0", id=request_id, result=wire)
        except Exception as exc:  # e.g. a result its serializer refuses: the SDK's answer
            message = JSONRPCError(jsonrpc="2.0", id=request_id, error=_error_data(exc, version))
        return _line(message)

    async def _outcome(self, spec: Any, args: dict[str, Any], origin: CallOrigin,
                       envelope: _Envelope) -> tuple[CallToolResult, str | None]:
        """The call's result as the SDK's tool wrapper words it (a tool's error, or a crash: isError), but for its
        structured content: its JSON text, the same as the text content (`Dispatcher.bounded_payload`)."""
        dispatcher = self._dispatcher
        notices = _Notices(self._write, envelope.token)
        try:
            with client_log.forwarding_to(_LineLog(notices, envelope.log_levels)):
                result = await dispatcher.run(spec.name, args, origin, sink=notices.progress, at_once=True)
            text = dispatcher.bounded_text(result)
            if text is None:  # too long: shrunk
                text = dispatcher.shrunk_payload(result)[1]
            return CallToolResult(content=[_plain_text(text)]), text
        except GeneralAgentError as exc:
            return _failed(f"Error executing tool {spec.name}: {exc}"), None
        except Exception:  # a crash: its text stays in the server's log
            log.exception("the quick call %s crashed", spec.name)
            return _failed(f"Error executing tool {spec.name}"), None
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
        request_id = as_request_id(params.get("requestId")) if isinstance(params, dict) else None
        if request_id is not None:
            key = request_key(request_id)
            self._awaited.pop(key, None)  # a cancelled request gets no answer to wait for
            task = self._running.pop(key, None)
            if task is not None:
                task.cancel()


def _read_envelope(meta: dict[str, Any]) -> _Envelope | None:
    """What the SDK reads from a 2026-07-28 call's `_meta` (its inbound ladder, its per-version params model,
    the connection it builds from the envelope, the log opt-in); None when it would refuse the call. Read
    with a name and arguments of the shape the lane takes (a string, an object), so only `_meta` decides."""
    params = {"name": "tool", "arguments": {}, "_meta": meta}
    route = classify_inbound_request({"method": "tools/call", "params": params})
    if not isinstance(route, InboundModernRoute):
        return None
    try:
        sdk_methods.validate_client_request("tools/call", route.protocol_version, params)
    except Exception:  # the SDK words the refusal
        return None
    connection = Connection.from_envelope(route.protocol_version, route.client_info, route.client_capabilities)
    info = connection.client_params.client_info if connection.client_params is not None else None
    client = info.name if info is not None and info.name else "default"
    return _Envelope(route.protocol_version, client, allowed_log_levels(route.protocol_version, meta), None)


class _Template:
    """The line the SDK's shaping writes for a plain answer at one protocol version, cut where the request id,
    the text and the structured content go: `filled` splices in each one's JSON (pydantic-core's, the writer
    of the SDK's lines). Shaped once with stand-ins; kept only when the shaping carried each of them through
    unchanged, to exactly one place in the line. What else the shaping adds depends on the protocol version
    and the server (its serverInfo stamp, fixed for the server's life), not on the answer."""

    def __init__(self, pieces: tuple[str, ...], slots: tuple[str, ...]) -> None:
        self._pieces, self._slots = pieces, slots  # len(pieces) == len(slots) + 1

    @classmethod
    def shaped(cls, serializer: ServerRunner, version: str) -> _Template | None:
        outcome = CallToolResult(content=[_plain_text(TEXT_STAND_IN)], structured_content=dict(STAND_IN))
        try:
            wire = serializer._serialize("tools/call", version, outcome)
            line = _line(JSONRPCResponse(jsonrpc="2.0", id=ID_STAND_IN, result=wire))
        except Exception:  # shaped per call instead (`_shaped`), which answers the SDK's error if it fails again
            return None
        if wire.get("structuredContent") != STAND_IN or wire.get("content") != [{"type": "text", "text": TEXT_STAND_IN}]:
            return None
        marks = {"id": to_json(ID_STAND_IN).decode(), "text": to_json(TEXT_STAND_IN).decode(), "structured": STAND_IN_JSON}
        if any(line.count(mark) != 1 for mark in marks.values()):
            return None
        slots = tuple(sorted(marks, key=lambda slot: line.index(marks[slot])))
        pieces = re.split("|".join(re.escape(marks[slot]) for slot in slots), line)
        return cls(tuple(pieces), slots)

    def filled(self, request_id: int | str, text: str) -> str:
        values = {"id": to_json(request_id).decode(), "text": to_json(text).decode(), "structured": text}
        parts = [self._pieces[0]]
        for slot, piece in zip(self._slots, self._pieces[1:], strict=True):
            parts += (values[slot], piece)
        return "".join(parts)


def _plain_text(text: str) -> TextContent:
    return TextContent(type="text", text=text)


def _error_data(exc: Exception, version: str) -> ErrorData:
    """The error the SDK answers for a handler's exception: its shared mapping, then its catch-all (2025 era:
    code 0 with the text, as its JSON-RPC dispatcher; 2026: the modern entries' internal error)."""
    if version in MODERN_PROTOCOL_VERSIONS:
        return modern_error_data(exc)
    found = handler_exception_to_error_data(exc)
    if found is None:
        log.exception("the quick call's answer could not be shaped")
    return found if found is not None else ErrorData(code=0, message=str(exc))


def _at_or_above(level: str) -> frozenset[str]:
    return frozenset(client_log.LEVELS[client_log.LEVELS.index(level):])


def _failed(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _line(message: JSONRPCResponse | JSONRPCError | JSONRPCNotification) -> str:
    """A message as the SDK's stdio writer puts it on the wire."""
    return message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"


def _token(meta: dict[str, Any] | None) -> int | str | None | bool:
    """The call's progress token (None: none asked); False for one the lane leaves to the SDK."""
    if not meta or "progressToken" not in meta:
        return None
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
    """A quick call's forwarded log records: `notifications/message` at the levels its envelope receives."""

    def __init__(self, notices: _Notices, levels: frozenset[str]) -> None:
        super().__init__(ctx=None, threshold=None)
        self._notices, self._levels = notices, levels

    def wants(self, level: str) -> bool:
        return level in self._levels

    async def send(self, level: str, data: Any, logger: str) -> None:
        with contextlib.suppress(Exception):  # best effort, as ClientLog.send
            await self._notices.notify("notifications/message", {"level": level, "logger": logger, "data": data})
