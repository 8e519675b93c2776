"""Other MCP servers whose tools sub-agents may use: the config file and its checks.

The file (`GENERALAGENT_MCP_SERVERS_FILE`, default `<data dir>/mcp_servers.toml`) holds one table per server:

    [servers.docs]                       # a local program, over stdio
    command = "uvx"
    args = ["some-mcp-server", "--readonly"]
    env = { API_TOKEN = "..." }          # optional: added to a minimal environment (PATH, HOME, ...)
    cwd = "/path/to/folder"              # optional (default: the data dir)

    [servers.wiki]                       # a running server, over Streamable HTTP
    url = "http://127.0.0.1:9000/mcp"
    headers = { Authorization = "Bearer ..." }

    # optional in either: start_timeout_seconds (30), call_timeout_seconds (60), enabled (true)

A sub-agent gets a server's tools when its agent card (`mcp_servers = ["docs"]`) or the delegate_task
call (`mcp_servers=["docs"]`) names it; they are named `docs__<tool>`. Each call passes the approval
gate like our own tools: with no rule naming it, it asks (allow one with `allow = ["docs__*"]` in
your policy.toml). The file is read on every use, so edits apply to the next sub-agent.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from foundation.errors import NotFound, SettingsError
from foundation.settings import Settings

SEPARATOR = "__"
SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$")  # no "__": it separates server and tool
MAX_SERVER_NAME = 32


class ServerConfig(BaseModel):
    """One [servers.<name>] table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    command: str | None = Field(default=None, min_length=1, description="The program to start (stdio).")
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    cwd: str | None = Field(default=None, description="Its working folder (default: the data dir).")
    url: str | None = Field(default=None, pattern=r"^https?://", description="A Streamable HTTP endpoint.")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers (e.g. Authorization).")
    start_timeout_seconds: float = Field(default=30.0, gt=0, le=600, description="Most time to start and list tools.")
    call_timeout_seconds: float = Field(default=60.0, gt=0, le=3600, description="Most time for one tool call.")
    enabled: bool = Field(default=True, description="False: not offered anywhere.")

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (a program, over stdio) or url (Streamable HTTP)")
        if self.url is None and self.headers:
            raise ValueError("headers are for url servers; give a stdio server env instead")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def describe(self) -> str:
        """`stdio: uvx some-server` or `http: http://...` (no env values, no headers: they may be secrets)."""
        if self.command is not None:
            return f"stdio: {' '.join([self.command, *self.args])[:200]}"
        return f"http: {self.url}"


def servers_file(settings: Settings) -> Path:
    return settings.mcp_servers_file or settings.data_dir / "mcp_servers.toml"


def load_servers(settings: Settings) -> dict[str, ServerConfig]:
    """Every server in the file ({} when there is no file); SettingsError names the problem."""
    path = servers_file(settings)
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"Cannot read the MCP servers file {path}: {exc}. Fix or remove it.") from None
    unknown = sorted(set(data) - {"servers"})
    if unknown:
        raise SettingsError(f"{path}: unknown key {unknown[0]!r}; servers are tables like [servers.docs].")
    tables = data.get("servers", {})
    if not isinstance(tables, dict):
        raise SettingsError(f"{path}: 'servers' must be tables like [servers.docs].")
    return {name: _server(path, name, body) for name, body in tables.items()}


def _server(path: Path, name: str, body: Any) -> ServerConfig:
    if not SERVER_NAME_RE.match(name) or len(name) > MAX_SERVER_NAME:
        raise SettingsError(f"{path}: server name {name!r} must be letters and digits, single - or _ between "
                            f"them (max {MAX_SERVER_NAME}).")
    if not isinstance(body, dict):
        raise SettingsError(f"{path}: [servers.{name}] must be a table.")
    try:
        return ServerConfig(name=name, **body)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "table"
        raise SettingsError(f"{path}: [servers.{name}] {where}: {err['msg'].removeprefix('Value error, ')}.") from None


def get_server(settings: Settings, name: str) -> ServerConfig:
    servers = {n: s for n, s in load_servers(settings).items() if s.enabled}
    if name not in servers:
        known = ", ".join(sorted(servers)) or f"none (configure them in {servers_file(settings)})"
        raise NotFound(f"No MCP server {name!r}. Configured servers: {known}.")
    return servers[name]


def split_name(tool: str) -> tuple[str, str] | None:
    """`docs__search` -> ("docs", "search"); None for a name of ours."""
    server, sep, rest = tool.partition(SEPARATOR)
    return (server, rest) if sep and server and rest else None
