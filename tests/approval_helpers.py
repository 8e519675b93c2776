"""Test-only tools that need approval (registered by monkeypatching registry.TOOLS)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from pydantic import BaseModel, Field

from foundation.toolspec import ToolSpec
from mcp_server import registry

CALLS: list[str] = []


class PokeResult(BaseModel):
    text: str = Field(description="What was poked.")


def poke(
    text: Annotated[str, Field(description="Text to poke with.")],
    path: Annotated[str | None, Field(description="A file to poke.")] = None,
) -> PokeResult:
    """Changes state (test tool): the default policy asks before it runs."""
    CALLS.append(text)
    return PokeResult(text=text)


POKE = ToolSpec(poke, title="Poke", read_only=False, tier="default")
ZAP = ToolSpec(poke, title="Zap", read_only=False, destructive=True, tier="full", name_override="zap")


def install(monkeypatch: Any, *specs: ToolSpec) -> None:
    CALLS.clear()
    monkeypatch.setattr(registry, "TOOLS", [*registry.TOOLS, *(specs or (POKE,))])


def elicitation_answer(action: str, decision: str | None = None, seen: list[str] | None = None) -> Any:
    from mcp_types import ElicitResult

    async def callback(context: Any, params: Any) -> Any:
        if seen is not None:
            seen.append(params.message)
        if action == "accept":
            return ElicitResult(action="accept", content={"decision": decision or "approve_once"})
        return ElicitResult(action=action)

    return callback


@contextmanager
def approvals(settings: Any) -> Iterator[Any]:
    """The approval store of the server's database (the backend under test)."""
    from foundation.storage import open_database
    from mcp_server.approval.store import ApprovalStore

    database = open_database(settings.data_dir, settings.database_url)
    try:
        yield ApprovalStore(database, settings.approval_ttl_seconds, settings)
    finally:
        database.close()


def audit_entries(settings: Any, limit: int = 100) -> list[dict[str, Any]]:
    """The last audit entries the server wrote (audit.jsonl, or the audit_log table on PostgreSQL)."""
    from foundation.storage import open_database
    from mcp_server.approval.audit import audit_log_for

    database = open_database(settings.data_dir, settings.database_url)
    try:
        return audit_log_for(database, settings.data_dir).read(limit)
    finally:
        database.close()


def cli_env(settings: Any) -> dict[str, str]:
    """A terminal's environment for the CLI on the server's state (no other GENERALAGENT_ settings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    env["GENERALAGENT_DATA_DIR"] = str(settings.data_dir)
    if settings.database_url:
        env["GENERALAGENT_DATABASE_URL"] = settings.database_url
    return env


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def real_http_server(settings: Any, server: Any = None) -> Iterator[tuple[Any, int]]:
    """Our Streamable HTTP app (for `server`, else a new one) served by uvicorn on a free loopback port,
    in a thread: the approval page answers only requests over a real socket (it looks up the client)."""
    import threading
    import time

    import uvicorn

    from mcp_server.server import build_server
    from mcp_server.transports import http_app

    if server is None:
        server, _ = build_server(settings)
    port = free_port()
    config = uvicorn.Config(http_app(server, settings, "127.0.0.1"), host="127.0.0.1", port=port,
                            log_level="warning", log_config=None)
    web = uvicorn.Server(config)
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60  # a loaded machine may take seconds: wait, and say so if it never starts
        while not web.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert web.started, f"uvicorn did not start on port {port}"
        yield server, port
    finally:
        web.should_exit = True
        thread.join(timeout=10)


@contextmanager
def page_client(settings: Any, server: Any) -> Iterator[Any]:
    """The human's browser stand-in: an httpx client in the test process, on `server`'s approval page
    served over real loopback HTTP (its `base_url` names the port)."""
    import httpx2 as httpx

    with real_http_server(settings, server) as (_, port), \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, cookies=page_cookie(settings)) as client:
        yield client


def page_cookie(settings: Any) -> dict[str, str]:
    """The approval page's key as the person's browser keeps it (after opening the keyed address once)."""
    from mcp_server.approval_keys import COOKIE, page_key

    return {COOKIE: page_key(settings.data_dir)}
