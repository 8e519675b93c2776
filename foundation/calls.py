"""Who is calling, and the typed seams the tool layer uses to reach what only the server has.

The MCP layer implements these protocols and hands them down (on the Runtime or the CallOrigin);
nothing below `mcp_server/` imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from foundation.toolspec import ToolSpec

OriginKind = Literal["client", "subagent"]
Consent = Literal["policy", "person"]
"""Who let a call run, as the approval gate found it: "policy" - the shipped policy's allow-list, no person
involved (a shell command then runs with every workspace root read-only: an allow-list miss writes nothing);
"person" - a person approved this call (a form, a grant, the approve command or page) or the user's own
allow rule names it (a shell command may write in the roots). Unknown: "policy" (fail closed)."""


class ClientChannel(Protocol):
    """The calling client, as far as tools may use it: ask its human mid-call, tell it the tool list changed."""

    def can_ask_now(self) -> bool:
        """True when a form can be shown to the human in the middle of this call."""
        ...

    async def ask(self, message: str, form: type[BaseModel]) -> dict[str, Any]:
        """Show `form` and return {"action": accept|decline|cancel, "content": {...} | None}."""
        ...

    async def notify_tools_changed(self) -> bool:
        """Tell the client to list tools again; False when nothing could be sent."""
        ...


@dataclass
class CallOrigin:
    """Who is calling: the MCP client, or a sub-agent (with its context id and agent stack)."""

    kind: OriginKind = "client"
    client_id: str = "default"
    session_id: str | None = None
    grant_key: str | None = None  # what "approve for this session" is bound to when there is no server-issued
    # session (sessionless HTTP: the bearer token's hash, else this call alone); None: client and session
    subagent_id: str | None = None
    agent_stack: tuple[str, ...] = ()
    channel: ClientChannel | None = None  # the client connection (None for CLI and in-process calls)
    mcp_context: Any = None  # opaque to everything below mcp_server/ (the SDK request context)
    approval_answer: Any = None  # the human's answer to this call's approval form, when one was shown
    human_answer: dict[str, Any] | None = None  # the human's answer to ask_human's form


class ToolRunner(Protocol):
    """Run a tool through the one dispatch point (approval, validation, bounding): what sub-agents use."""

    @property
    def specs(self) -> Mapping[str, ToolSpec]: ...

    @property
    def max_result_tokens(self) -> int: ...

    async def run(self, name: str, args: dict[str, Any], origin: CallOrigin, sink: Any = None,
                  validate: bool = False, *, spec: ToolSpec | None = None) -> BaseModel:
        """`spec`: run this tool (another MCP server's, not registered here) instead of looking `name` up."""
        ...


class ToolSources(Protocol):
    """Other MCP servers whose tools sub-agents may be given (configured in the data dir)."""

    def names(self) -> list[str]:
        """The configured, enabled servers."""
        ...

    async def tools(self, server: str) -> list[ToolSpec]:
        """That server's tools as `server__tool` specs (started on first use); raises GeneralAgentError
        (NotFound for an unknown server, a clear error when it does not start in time)."""
        ...


class ToolCatalogView(Protocol):
    """Which tools are listed to a client, and enabling more of them (tool tiers)."""

    def all_specs(self) -> list[ToolSpec]: ...

    def is_listed(self, name: str, origin: CallOrigin | None = None) -> bool:
        """Listed for the calling session (the profile's tools plus the ones it enabled)."""
        ...

    def enable(self, names: list[str], origin: CallOrigin | None = None) -> list[str]:
        """Enable for the calling session; returns the newly enabled names."""
        ...

    async def notify_changed(self, origin: CallOrigin | None) -> bool: ...


class SecretPaths(Protocol):
    """The approval policy's secret-path rule (the data read_file's secret check uses, the user's rules
    file included), handed down so that the index never holds nor finds what a read would have to ask for."""

    def rule(self, path: str, roots: tuple[Path, ...]) -> str | None:
        """For an absolute path seen from these workspace roots: the id of the rule that makes it a
        secret (as a read of it would be decided), or None."""
        ...

    def key(self) -> str:
        """Changes when the rules do (other secret patterns): an index is checked again then."""
        ...

    def store(self, path: str, roots: tuple[Path, ...]) -> bool:
        """Whether an absolute path is a secret store (a deny rule: no tool may read it; `rule` gives the id
        of this rule or of an ask rule). Not kept: for callers that keep their own answers."""
        ...

    def home_store(self, path: str, home: Path) -> bool:
        """Whether an absolute path in the user's home is kept from shell commands: a secret store (as
        `store`, home-relative too), or what a read would ask for in its home-relative path (`.npmrc`,
        `.pypirc`): tools' credentials, which a command in the sandbox's private home never needs."""
        ...
