"""MCP-level helpers for asking the human: capability checks and the entry's resolvers."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel

from mcp_server.eras import is_modern

log = logging.getLogger("generalagent.server")


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


class McpClientChannel:
    """The ClientChannel tools use, over the SDK request context of the calling client."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    def can_ask_now(self) -> bool:
        return can_elicit_now(self.ctx)

    async def ask(self, message: str, form: type[BaseModel]) -> dict[str, Any]:
        outcome = await self.ctx.elicit(message, form)
        data = getattr(outcome, "data", None)
        return {"action": outcome.action, "content": data.model_dump(mode="json") if data is not None else None}

    async def notify_tools_changed(self) -> bool:
        """tools/list_changed: a listen event on 2026-07-28, a notification on 2025-era sessions."""
        sent = False
        try:
            await self.ctx.notify_tools_changed()
            sent = True
        except Exception:
            log.debug("no subscription bus for list_changed", exc_info=True)
        try:
            if is_modern(self.ctx):
                from mcp_types import ToolListChangedNotification

                await self.ctx.request_context.session.send_notification(
                    ToolListChangedNotification(), related_request_id=self.ctx.request_id)
            else:
                await self.ctx.session.send_tool_list_changed()
            sent = True
        except Exception:
            log.warning("could not send notifications/tools/list_changed", exc_info=True)
        return sent
