"""A small OpenAI-compatible chat endpoint for tests, on 127.0.0.1 (never the internet).

Usage (pytest fixture `fake_llm`, import it into a test module or conftest):

    from tests.fake_llm import fake_llm  # noqa: F401  (the fixture)

    def test_x(fake_llm, make_settings):
        fake_llm.reply_text("a summary")
        fake_llm.reply_tool_calls([("todo_write", {"items": []})])
        fake_llm.reply_error(500, "boom")
        fake_llm.reply_text("late", delay=3.0)          # answer after 3 s (client timeouts)
        settings = make_settings(**fake_llm.settings_overrides())
        ...
        assert fake_llm.requests[0]["messages"][0]["role"] == "system"

Replies are served in order from a queue; when the queue is empty the `default` reply is used
(HTTP 500 "no scripted reply left" unless set with `set_default`). `respond_with(fn)` installs a
function `fn(request_json) -> Reply | None` consulted before the queue (None: fall through).
Every request body is recorded in `requests` (headers in `headers`).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

MODEL = "fake-model"


@dataclass
class Reply:
    """One scripted HTTP answer."""

    status: int = 200
    body: Any = None  # dict -> JSON; str/bytes -> sent as is (malformed answers)
    delay: float = 0.0


def completion(
    content: str | None = None,
    tool_calls: list[tuple[str, dict[str, Any]]] | None = None,
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    finish_reason: str | None = None,
) -> dict[str, Any]:
    """A chat.completion body with text and/or tool calls ((name, arguments) pairs)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}_{name}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(tool_calls)
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "fake_error", "code": status}}


@dataclass
class FakeLLM:
    """The scripted server's state; `base_url` ends in /v1 like real endpoints."""

    base_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    queue: deque[Reply] = field(default_factory=deque)
    default: Reply = field(
        default_factory=lambda: Reply(500, error_body(500, "fake_llm: no scripted reply left"))
    )
    responder: Callable[[dict[str, Any]], Reply | None] | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    # -- scripting
    def reply_text(self, text: str, delay: float = 0.0, **usage: int) -> None:
        self.queue.append(Reply(200, completion(text, **usage), delay))

    def reply_tool_calls(
        self, calls: list[tuple[str, dict[str, Any]]], content: str | None = None, delay: float = 0.0
    ) -> None:
        self.queue.append(Reply(200, completion(content, calls), delay))

    def reply_error(self, status: int, message: str = "scripted failure", delay: float = 0.0) -> None:
        self.queue.append(Reply(status, error_body(status, message), delay))

    def reply_raw(self, body: Any, status: int = 200, delay: float = 0.0) -> None:
        self.queue.append(Reply(status, body, delay))

    def set_default(self, reply: Reply) -> None:
        self.default = reply

    def respond_with(self, fn: Callable[[dict[str, Any]], Reply | None] | None) -> None:
        self.responder = fn

    # -- wiring helpers
    def settings_overrides(self, timeout_seconds: float = 5.0) -> dict[str, Any]:
        """Keyword overrides for the `make_settings` fixture pointing the server at this endpoint."""
        return {
            "llm_base_url": self.base_url,
            "llm_model": MODEL,
            "llm_api_key": "test-key",
            "llm_timeout_seconds": timeout_seconds,
        }

    def config(self, timeout_seconds: float = 5.0, max_retries: int = 0) -> Any:
        from context.llm import LLMConfig

        return LLMConfig(self.base_url, MODEL, "test-key", timeout_seconds, max_retries)

    def next_reply(self, request: dict[str, Any]) -> Reply:
        with self.lock:
            self.requests.append(request)
            if self.responder is not None:
                chosen = self.responder(request)
                if chosen is not None:
                    return chosen
            return self.queue.popleft() if self.queue else self.default


def _handler_for(state: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(Reply(404, error_body(404, f"fake_llm: unknown path {self.path}")))
                return
            try:
                request = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send(Reply(400, error_body(400, "fake_llm: body is not JSON")))
                return
            state.headers.append({k.lower(): v for k, v in self.headers.items()})
            reply = state.next_reply(request)
            if reply.delay and state.stopping.wait(reply.delay):
                return
            self._send(reply)

        def _send(self, reply: Reply) -> None:
            if isinstance(reply.body, (dict, list)):
                payload = json.dumps(reply.body).encode()
            elif isinstance(reply.body, str):
                payload = reply.body.encode()
            else:
                payload = reply.body or b""
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                pass

    return Handler


def start_fake_llm() -> tuple[FakeLLM, Callable[[], None]]:
    """Start the server on a free loopback port; returns (state, stop)."""
    state = FakeLLM()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(state))
    server.daemon_threads = True
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="fake-llm", daemon=True
    )  # fast stop
    thread.start()

    def stop() -> None:
        state.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return state, stop


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    state, stop = start_fake_llm()
    try:
        yield state
    finally:
        stop()
