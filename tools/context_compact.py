"""compact_context: replace the older part of a conversation by a summary (context.compact)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from context import carryover
from context.compact import CompactOptions, Prior, Strategy, Summarizer, compact
from context.messages import render
from context.store import prefix_hash
from context.tokens import counter_for
from foundation.errors import LLMNotConfigured
from tools.context_common import (
    TOKENIZER_EXACT,
    USER_WORDS,
    ConversationParam,
    FormatParam,
    MessagesPage,
    MessagesParam,
    ModelParam,
    PageParam,
    SizeReport,
    SystemParam,
    WindowParam,
    context_store,
    paged,
    parse_transcript,
    stored_todos,
)
from tools.runtime import CallContext, Runtime


class CompactReportModel(SizeReport):
    action: str = Field(description="compacted, or skipped (see reason).")
    reason: str = Field(
        description="Why it was skipped; and, when the result is still over context_window, what it is made "
        "of and what to change (empty when compacted to fit)."
    )
    fits_window: bool = Field(description="True when tokens_after <= context_window (else see reason).")
    strategy: str = Field(description="compact (detailed, sectioned) or summarize (short).")
    source: str = Field(description="llm, fallback (made by code after an LLM problem) or none.")
    fallback_reason: str | None = Field(description="Why the LLM was not used (null when it was).")
    incremental: bool = Field(description="True when an earlier summary was folded in.")
    ratio: float = Field(description="tokens_after / tokens_before.")
    summary_tokens: int = Field(description="Tokens of the summary message.")
    llm_tokens: int = Field(description="Tokens the LLM call used (prompt + completion).")
    todos_carried: int = Field(description="Open todo items appended to the summary by code.")
    todo_source: str = Field(description="Where the todo items came from.")
    constraints_carried: int = Field(
        description="The user's sentences appended verbatim by code (the summary had left them out)."
    )
    user_words: dict[str, Any] = Field(description=USER_WORDS)
    encoding: str = Field(description="The tokenizer used (cl100k_base or o200k_base).")
    tokenizer_exact: bool = Field(description=TOKENIZER_EXACT)
    stored: bool = Field(description="True when the summary was saved under conversation_id.")


class CompactResult(MessagesPage):
    report: CompactReportModel = Field(description="What was done.")


def llm_summarizer(rt: Runtime) -> Summarizer | None:
    """A Summarizer over the configured endpoint, or None when none is configured."""
    from context.llm import LLMConfig, chat

    try:
        config = LLMConfig.from_settings(rt.settings, "compact_context", slot="chat")
    except LLMNotConfigured:
        return None

    def summarize(chat_messages: list[dict[str, Any]], max_tokens: int) -> tuple[str, int]:
        reply = chat(config, chat_messages, max_tokens=max_tokens, temperature=0.2)
        return reply.content or "", reply.total_tokens

    return summarize




def _prior(request: CompactRequest, rt: Runtime, call: CallContext) -> Prior:
    """The open todos and, under a conversation id, the summary saved for the same first messages."""
    todos, todo_source = _store_todos(rt, request.todo_list_id, call.client_id)
    prior = Prior(todos=todos, todo_source=todo_source)
    saved = context_store(rt).get(request.conversation_id) if request.conversation_id else None
    if saved and saved.covered_messages <= len(request.messages) and (
            prefix_hash(request.messages, saved.covered_messages) == saved.prefix_hash):
        prior.summary, prior.covered = saved.summary, saved.covered_messages
    return prior


def _store_todos(rt: Runtime, list_id: str | None, client_id: str) -> tuple[list[carryover.Todo] | None, str]:
    """The todo list's items from the todo store (None when it is empty)."""
    stored = stored_todos(rt, list_id, client_id)
    if stored is None:
        return None, "none"
    return [carryover.Todo(i.content, i.status) for i in stored.items], f"todo list {stored.list_id!r}"


def compact_context(
    messages: MessagesParam,
    strategy: Annotated[
        Literal["auto", "compact", "summarize"],
        Field(
            description="compact: detailed sectioned summary; summarize: short (<200 words); auto: by size, "
            "and only when needed (over context_window, 20+ messages, or enough new since the last summary)."
        ),
    ] = "auto",
    context_window: WindowParam = 128_000,
    keep_recent_tokens: Annotated[
        int | None,
        Field(ge=0, description="Tokens of newest messages kept verbatim (default 15% of the window)."),
    ] = None,
    instructions: Annotated[
        str | None,
        Field(max_length=2000, description="Extra instructions for the summary (what to focus on)."),
    ] = None,
    conversation_id: ConversationParam = None,
    todo_list_id: Annotated[
        str | None, Field(description="Todo list to carry over (default: this workspace's list).")
    ] = None,
    model: ModelParam = None,
    system: SystemParam = None,
    format: FormatParam = "auto",
    page_offset: PageParam = 0,
    *,
    rt: Runtime,
    call: CallContext,
) -> CompactResult:
    """Replace the older part of a conversation by a summary (via the configured LLM endpoint):
    returns [system..., summary, first request, recent...]. Open todos and every sentence the user
    wrote that the summary left out are carried over verbatim by code. Without an LLM, or when it fails, falls back to truncation
    and says so. auto always compacts a conversation over context_window; else it waits for 20+ messages, and
    re-summarises only when enough is new."""
    request = CompactRequest(messages, strategy, context_window, keep_recent_tokens, instructions, conversation_id,
                             todo_list_id, model, system, format)
    page, data = paged(rt, "compact", vars(request), page_offset, lambda: _compact(request, rt, call))
    return CompactResult(**page.model_dump(), report=data)


@dataclass(frozen=True)
class CompactRequest:
    """What compact_context was asked (all but the page): what `_compact` reads and what keys the page cache."""

    messages: list[dict[str, Any]]
    strategy: Strategy
    window: int
    keep_recent: int | None
    instructions: str | None
    conversation_id: str | None
    todo_list_id: str | None
    model: str | None
    system: Any
    fmt: str


def _compact(request: CompactRequest, rt: Runtime, call: CallContext) -> tuple[Any, ...]:
    messages, conversation_id = request.messages, request.conversation_id
    transcript = parse_transcript(messages, request.system, request.fmt)
    counter = counter_for(request.model)
    store = context_store(rt) if conversation_id else None
    prior = _prior(request, rt, call)
    call.report(0, 2, "summarising")
    options = CompactOptions(request.strategy, request.window, request.keep_recent, request.instructions,
                             fmt=transcript.format)
    out, report, summary = compact(transcript.messages, counter, options, llm_summarizer(rt), prior)
    stored = False
    if store is not None and conversation_id and summary is not None and report.covered_sources > 0:
        covered = report.covered_sources
        store.put(conversation_id, summary, covered, prefix_hash(messages, covered), report.source)
        stored = True
    rendered, system_out = render(transcript, out)
    data = CompactReportModel(
        **{k: v for k, v in report.__dict__.items() if k in CompactReportModel.model_fields and k != "words"},
        stored=stored,
        user_words=report.words.as_dict(),
        encoding=counter.name,
        tokenizer_exact=not counter.estimate,
    )
    data.messages_before, data.messages_after = len(messages), len(rendered)
    return transcript.format, rendered, system_out, data
