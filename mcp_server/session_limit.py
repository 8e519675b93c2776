"""Fair room for 2025-era HTTP sessions (issue 30, finding 7): a flood of `initialize` must not lock others out.

The SDK refuses a new session with 503 once `max_sessions` are open: 10,000 `initialize` in 25 s from one
local process locked every other 2025-era client out for the sessions' idle time. This ASGI layer keeps the
open sessions below that limit by ending one before admitting another: one of the client holding the most
sessions (clients told apart by their declared name and their credential), its least recently used one.
A flooder so ends its own sessions; a client with few sessions keeps them. A session is ended the way a
client ends it (an HTTP DELETE with its id, sent to the SDK's app), so the SDK's own bookkeeping stays
the one truth; a session that already expired just answers 404 to it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

log = logging.getLogger("generalagent.http")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_OPEN_SESSIONS = 1000
"""Sessions kept open at most; the SDK's own limit is set above it (`sdk_limit`) and so never reached."""


def sdk_limit() -> int:
    return 2 * MAX_OPEN_SESSIONS
SESSION_HEADER = b"mcp-session-id"


class SessionRoom:
    """Wraps the SDK's Streamable HTTP app (inside the Host/Origin checks and the token)."""

    def __init__(self, app: Callable[..., Awaitable[None]], limit: int | None = None,
                 max_body: int = 4 * 1024 * 1024) -> None:
        self.app, self.limit, self.max_body = app, limit or MAX_OPEN_SESSIONS, max_body
        self.sessions: OrderedDict[str, str] = OrderedDict()  # session id -> its client, least recently used first

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith("/mcp"):
            await self.app(scope, receive, send)
            return
        session = _header(scope, SESSION_HEADER)
        if session is not None:
            if scope.get("method") == "DELETE":
                self.sessions.pop(session, None)
            elif session in self.sessions:
                self.sessions.move_to_end(session)
            await self.app(scope, receive, send)
            return
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body, replay = await _buffered(receive, self.max_body)
        client = _opening_client(scope, body)
        if client is not None:
            while len(self.sessions) >= self.limit:
                await self._end(scope, *self._victim())
        await self.app(scope, replay, self._noting(send, client))

    def _victim(self) -> tuple[str, str]:
        """The least recently used session of the client that holds the most."""
        counts: dict[str, int] = {}
        for owner in self.sessions.values():
            counts[owner] = counts.get(owner, 0) + 1
        top = max(counts.values())
        session = next(s for s, owner in self.sessions.items() if counts[owner] == top)
        return session, self.sessions.pop(session)

    async def _end(self, scope: Scope, session: str, client: str) -> None:
        log.info("ending session %s of %s to make room (%d open)", session[:12], client[:40], len(self.sessions) + 1)
        headers = [(k, v) for k, v in scope.get("headers", []) if k in (b"host", b"authorization")]
        ending = {**scope, "method": "DELETE", "headers": [*headers, (SESSION_HEADER, session.encode())],
                  "query_string": b""}

        async def nothing() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Message) -> None:
            return None

        try:
            await self.app(ending, nothing, discard)
        except Exception:  # the session is gone from our list either way
            log.exception("could not end session %s", session[:12])

    def _noting(self, send: Send, client: str | None) -> Send:
        async def noted(message: Message) -> None:
            if client is not None and message.get("type") == "http.response.start":
                made = next((v.decode("latin-1") for k, v in message.get("headers", []) if k.lower() == SESSION_HEADER),
                            None)
                if made is not None:
                    self.sessions[made] = client
            await send(message)

        return noted


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


async def _buffered(receive: Receive, limit: int) -> tuple[bytes, Receive]:
    """The request body (up to `limit` + 1 bytes read) and a `receive` that hands the same messages on."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message.get("type") != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body") or size > limit:
            break
    body = b"".join(m.get("body", b"") for m in messages if m.get("type") == "http.request")
    pending = list(messages)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return (body if size <= limit else b""), replay


def _opening_client(scope: Scope, body: bytes) -> str | None:
    """For an `initialize` request: who opens the session (declared name + a hash of the credential)."""
    try:
        message = json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    params = message.get("params")
    info = params.get("clientInfo") if isinstance(params, dict) else None
    name = str(info.get("name", "?"))[:100] if isinstance(info, dict) else "?"
    credential = _header(scope, b"authorization") or ""
    return f"{name}|{hashlib.sha256(credential.encode()).hexdigest()[:12]}"
