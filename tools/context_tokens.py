"""Token tools: count_tokens and context_status (offline, tiktoken)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from context.status import context_level
from context.tokens import TOKENS_REPLY_PRIMING, counter_for, message_tokens
from foundation.errors import InvalidInput
from tools.context_common import (
    Message,
    ModelParam,
    SystemParam,
    WindowParam,
    parse_transcript,
    total_tokens,
)
from tools.runtime import Runtime


class TokenCount(BaseModel):
    tokens: int = Field(description="Token count (messages: content plus chat framing).")
    encoding: str = Field(description="tiktoken encoding used (cl100k_base or o200k_base).")
    estimate: bool = Field(description="True when the model's own tokenizer was not available.")
    exact: bool = Field(description="True when this is an exact count with the model's own tokenizer.")
    model: str | None = Field(description="The model asked about.")
    messages: int | None = Field(description="Number of messages counted (null for text).")
    by_role: dict[str, int] = Field(description="Tokens per role (messages only).")


def count_tokens(
    text: Annotated[str | None, Field(description="Text to count (or pass messages).")] = None,
    messages: Annotated[
        list[Message] | None, Field(description="Messages to count (OpenAI or Anthropic format).")
    ] = None,
    model: ModelParam = None,
    system: SystemParam = None,
) -> TokenCount:
    """Count tokens of a text or a message list with tiktoken (offline, cl100k_base and o200k_base
    bundled). Pass `model` for its tokenizer: OpenAI models count exactly (exact=true); other
    vendors' models use the nearest encoding and are marked estimate."""
    if (text is None) == (messages is None):
        raise InvalidInput("Pass exactly one of text or messages.")
    counter = counter_for(model)
    if text is not None:
        return TokenCount(
            tokens=counter.count(text),
            encoding=counter.name,
            estimate=counter.estimate,
            exact=not counter.estimate,
            model=model,
            messages=None,
            by_role={},
        )
    transcript = parse_transcript(messages or [], system, "auto")
    by_role: dict[str, int] = {}
    for msg in transcript.messages:
        by_role[msg.role] = by_role.get(msg.role, 0) + message_tokens(counter, msg)
    return TokenCount(
        tokens=sum(by_role.values()) + (TOKENS_REPLY_PRIMING if transcript.messages else 0),
        encoding=counter.name,
        estimate=counter.estimate,
        exact=not counter.estimate,
        model=model,
        messages=len(messages or []),
        by_role=by_role,
    )


# ---------------------------------------------------------------- context_status


class ContextStatus(BaseModel):
    tokens: int = Field(description="Tokens in the context.")
    context_window: int = Field(description="The window size used.")
    ratio: float = Field(description="tokens / context_window.")
    level: Literal["info", "warning", "critical"] = Field(
        description="info < warning ratio <= warning < critical."
    )
    tokens_left: int = Field(description="Tokens left in the window.")
    recommendation: str = Field(description="What to do now.")
    estimate: bool = Field(description="True when the token count is an estimate.")


def context_status(
    context_window: WindowParam,
    messages: Annotated[
        list[Message] | None, Field(description="The conversation to measure (or pass prompt_tokens).")
    ] = None,
    prompt_tokens: Annotated[
        int | None, Field(ge=0, description="Tokens already known (e.g. usage.prompt_tokens from your API).")
    ] = None,
    model: ModelParam = None,
    system: SystemParam = None,
    warning_ratio: Annotated[
        float | None, Field(gt=0, lt=1, description="Warning level; default from server settings (0.75).")
    ] = None,
    critical_ratio: Annotated[
        float | None, Field(gt=0, le=1, description="Critical level; default from server settings (0.95).")
    ] = None,
    *,
    rt: Runtime,
) -> ContextStatus:
    """How full the context window is: tokens, ratio, level (info/warning/critical) and a one-line
    recommendation, e.g. to call compact_context."""
    if (messages is None) == (prompt_tokens is None):
        raise InvalidInput("Pass exactly one of messages or prompt_tokens.")
    counter = counter_for(model)
    if messages is not None:
        tokens, estimate = total_tokens(counter, parse_transcript(messages, system, "auto").messages), counter.estimate
    else:
        tokens, estimate = int(prompt_tokens or 0), False
    warning = warning_ratio or rt.settings.context_warning_ratio
    critical = critical_ratio or rt.settings.context_critical_ratio
    if warning >= critical:
        raise InvalidInput(f"warning_ratio ({warning}) must be below critical_ratio ({critical}).")
    status = context_level(tokens, context_window, warning, critical)
    return ContextStatus(**status.__dict__, estimate=estimate)
