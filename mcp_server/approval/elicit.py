"""MCP-level helpers for asking the human: capability checks and the entry's resolvers."""

from __future__ import annotations

from typing import Any

from mcp_types.version import is_version_at_least

MODERN_VERSION = "2026-07-28"


def is_modern(ctx: Any) -> bool:
    version = getattr(ctx, "protocol_version", None)
    return version is not None and is_version_at_least(version, MODERN_VERSION)


def supports_form_elicitation(ctx: Any) -> bool:
    """True when the client declared form elicitation (a bare `elicitation: {}` counts as form)."""
    try:
        capabilities = ctx.client_capabilities
    except Exception:
        return False
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def can_elicit_now(ctx: Any) -> bool:
    """A standalone elicitation request can be sent mid-call (2025-era connection with the capability)."""
    try:
        return (not is_modern(ctx)) and supports_form_elicitation(ctx) and bool(ctx.session.can_send_request)
    except Exception:
        return False
