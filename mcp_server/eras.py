"""Which protocol era a session speaks: 2025 (initialize handshake, sessions) or 2026-07-28 (sessionless)."""

from __future__ import annotations

from typing import Any

from mcp_types.version import is_version_at_least

MODERN_VERSION = "2026-07-28"


def is_modern(ctx: Any) -> bool:
    version = getattr(ctx, "protocol_version", None)
    return version is not None and is_version_at_least(version, MODERN_VERSION)
