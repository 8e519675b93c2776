"""Context tools: count_tokens, context_status, optimize_context, compact_context, assemble_context.

Thin wrappers over `context/` (pure functions over message lists). Large message lists are
returned in pages: the result of a call is cached briefly, so asking again with the same
arguments and `page_offset` returns the next page without recomputing (or re-calling the LLM).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from context import carryover
from context.compact import CompactOptions, Prior, Summarizer, compact, split_summary
from context.layout import attach, emit, observe, reminder_block, system_text, text_hash
from context.messages import Msg, Transcript, parse, render
from context.optimize import Budget, optimize
from context.status import context_level
from context.store import ContextStore, prefix_hash
from context.todos import TodoList, reminder_of
from context.tokens import TOKENS_REPLY_PRIMING, Counter, counter_for, message_tokens
from mcp_server.bounding import dumps, estimate_tokens
from mcp_server.errors import InvalidInput, LLMNotConfigured
from tools.runtime import CallContext, Runtime
from tools.todos import resolve_list_id, todo_store

MessagesParam = Annotated[
    list[dict[str, Any]],
    Field(
        description="The conversation, OpenAI Chat format (role system/user/assistant/tool, tool_calls, "
        "tool_call_id) or Anthropic Messages format (user/assistant with text/tool_use/tool_result blocks). "
        "Results come back in the same format."
    ),
]
SystemParam = Annotated[
    str | list[dict[str, Any]] | None,
    Field(description="Anthropic format only: the separate system prompt (string or text blocks)."),
]
FormatParam = Annotated[
    Literal["auto", "openai", "anthropic"],
    Field(description="Message format; auto detects it from the messages."),
]
WindowParam = Annotated[
    int, Field(ge=1000, le=10_000_000, description="The model's context window in tokens, e.g. 128000.")
]
ModelParam = Annotated[
    str | None,
    Field(description="Model name to pick the tokenizer, e.g. gpt-4o. Non-OpenAI models give an estimate."),
]
PageParam = Annotated[
    int,
    Field(
        ge=0, description="Return messages from this index (use next_offset of a previous identical call)."
    ),
]
ConversationParam = Annotated[
    str | None,
    Field(
        max_length=200, description="Your conversation's id: keeps summaries / reminder state across calls."
    ),
]


# ---------------------------------------------------------------- shared helpers


class MessagesPage(BaseModel):
    format: str = Field(description="openai or anthropic (the format of the input).")
    messages: list[dict[str, Any]] = Field(description="The resulting messages (this page), in your format.")
    system: Any = Field(default=None, description="Anthropic format: the system prompt to send (else null).")
    total_messages: int = Field(description="How many messages the full result has.")
    offset: int = Field(description="Index of the first message in this page.")
    next_offset: int | None = Field(
        description="Call again with page_offset=this for the rest (null: complete)."
    )


_CACHE_ENTRIES = 8


class PageCache:
    """The last few full results per runtime, so page_offset > 0 reuses them (no recompute, no LLM)."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, tuple[Any, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[Any, ...] | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: str, value: tuple[Any, ...]) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > _CACHE_ENTRIES:
                self._items.popitem(last=False)


def _key(name: str, **parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return name + ":" + hashlib.sha256(text.encode()).hexdigest()


def _paged(
    rt: Runtime, name: str, key_parts: dict[str, Any], offset: int, compute: Callable[[], tuple[Any, ...]]
) -> tuple[MessagesPage, Any]:
    """(page, report) of a (format, messages, system, report) result. The first page is always
    computed; results that need more pages are cached so later pages reuse them."""
    cache = rt.service("context_page_cache", PageCache)
    key = _key(name, **key_parts) if offset > 0 else None
    hit = cache.get(key) if key else None
    if hit is None:
        hit = compute()
    fmt, rendered, system_out, data = hit
    page = _page(rt, fmt, rendered, system_out, offset)
    if page.next_offset is not None:
        cache.put(key or _key(name, **key_parts), hit)
    return page, data


def _page(rt: Runtime, fmt: str, messages: list[dict[str, Any]], system: Any, offset: int) -> MessagesPage:
    if offset > len(messages):
        raise InvalidInput(f"page_offset {offset} is past the end ({len(messages)} messages).")
    budget = int(rt.settings.max_result_tokens * 0.7) - (estimate_tokens(dumps(system)) if system else 0)
    end, used = offset, 0
    while end < len(messages):
        cost = estimate_tokens(dumps(messages[end])) + 2
        if end > offset and used + cost > budget:
            break
        used += cost
        end += 1
    return MessagesPage(
        format=fmt,
        messages=messages[offset:end],
        system=system if offset == 0 else None,
        total_messages=len(messages),
        offset=offset,
        next_offset=end if end < len(messages) else None,
    )


def _parse(messages: list[dict[str, Any]], system: Any, fmt: str) -> Transcript:
    return parse(messages, system, fmt)  # type: ignore[arg-type]


def _total(counter: Counter, msgs: list[Msg]) -> int:
    return sum(message_tokens(counter, m) for m in msgs) + (TOKENS_REPLY_PRIMING if msgs else 0)


def context_store(rt: Runtime) -> ContextStore:
    return rt.service("context_store", lambda: ContextStore(rt.data_dir / "context.sqlite3"))


# ---------------------------------------------------------------- count_tokens


class TokenCount(BaseModel):
    tokens: int = Field(description="Token count (messages: content plus chat framing).")
    encoding: str = Field(description="tiktoken encoding used (cl100k_base or o200k_base).")
    estimate: bool = Field(description="True when the model's own tokenizer was not available.")
    model: str | None = Field(description="The model asked about.")
    messages: int | None = Field(description="Number of messages counted (null for text).")
    by_role: dict[str, int] = Field(description="Tokens per role (messages only).")


def count_tokens(
    text: Annotated[str | None, Field(description="Text to count (or pass messages).")] = None,
    messages: Annotated[
        list[dict[str, Any]] | None, Field(description="Messages to count (OpenAI or Anthropic format).")
    ] = None,
    model: ModelParam = None,
    system: SystemParam = None,
) -> TokenCount:
    """Count tokens of a text or a message list with tiktoken (offline). Pass `model` for its
    tokenizer; for non-OpenAI models the count is the nearest encoding's and marked estimate."""
    if (text is None) == (messages is None):
        raise InvalidInput("Pass exactly one of text or messages.")
    counter = counter_for(model)
    if text is not None:
        return TokenCount(
            tokens=counter.count(text),
            encoding=counter.name,
            estimate=counter.estimate,
            model=model,
            messages=None,
            by_role={},
        )
    transcript = _parse(messages or [], system, "auto")
    by_role: dict[str, int] = {}
    for msg in transcript.messages:
        by_role[msg.role] = by_role.get(msg.role, 0) + message_tokens(counter, msg)
    return TokenCount(
        tokens=sum(by_role.values()) + (TOKENS_REPLY_PRIMING if transcript.messages else 0),
        encoding=counter.name,
        estimate=counter.estimate,
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
        list[dict[str, Any]] | None, Field(description="The conversation to measure (or pass prompt_tokens).")
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
        tokens, estimate = _total(counter, _parse(messages, system, "auto").messages), counter.estimate
    else:
        tokens, estimate = int(prompt_tokens or 0), False
    warning = warning_ratio or rt.settings.context_warning_ratio
    critical = critical_ratio or rt.settings.context_critical_ratio
    if warning >= critical:
        raise InvalidInput(f"warning_ratio ({warning}) must be below critical_ratio ({critical}).")
    status = context_level(tokens, context_window, warning, critical)
    return ContextStatus(**status.__dict__, estimate=estimate)


# ---------------------------------------------------------------- optimize_context


ESTIMATED = (
    "True when tokens_before is an estimate: large inputs are not tokenised in full (dropped messages "
    "are sized from an exact count of a sample). tokens_after is always exact."
)


class OptimizeReport(BaseModel):
    tokens_before: int = Field(description="Tokens of the input (see tokens_before_estimated).")
    tokens_before_estimated: bool = Field(description=ESTIMATED)
    tokens_after: int = Field(description="Tokens of the output.")
    messages_before: int = Field(description="Messages in the input.")
    messages_after: int = Field(description="Messages in the output.")
    removed: int = Field(description="Messages removed (orphans and old turns).")
    compressed: int = Field(description="Tool outputs compressed.")
    orphans_removed: int = Field(description="Unanswered tool calls and results without their call, removed.")
    budgets: dict[str, int] = Field(description="The token budgets used (target, system, recent, head...).")


class OptimizeResult(MessagesPage):
    report: OptimizeReport = Field(description="What was done.")


def optimize_context(
    messages: MessagesParam,
    context_window: WindowParam,
    target_ratio: Annotated[float, Field(gt=0, le=1, description="Aim for this share of the window.")] = 0.6,
    summary_ratio: Annotated[
        float, Field(ge=0, lt=1, description="Share of the target kept free for a summary (when one exists).")
    ] = 0.26,
    recent_ratio: Annotated[
        float,
        Field(
            gt=0, le=1, description="Share of the budget for the newest messages; the rest for the oldest."
        ),
    ] = 0.65,
    tool_output_max_tokens: Annotated[
        int, Field(ge=20, le=100_000, description="Tool outputs above this many tokens are compressed.")
    ] = 200,
    min_messages: Annotated[
        int, Field(ge=0, le=1000, description="Never drop turns when there are this few.")
    ] = 10,
    model: ModelParam = None,
    system: SystemParam = None,
    format: FormatParam = "auto",
    page_offset: PageParam = 0,
    *,
    rt: Runtime,
) -> OptimizeResult:
    """Shrink a conversation without an LLM: drop unanswered tool calls and orphaned results, compress
    big tool outputs (JSON-aware), keep system messages, the newest turns and the first request
    under the budget. Tool chains stay whole: the output is always valid for the chat APIs."""

    def compute() -> tuple[Any, ...]:
        transcript = _parse(messages, system, format)
        counter = counter_for(model)
        budget = Budget(
            context_window, target_ratio, summary_ratio, recent_ratio, tool_output_max_tokens, min_messages
        )
        reserve = _summary_reserve(transcript.messages, counter, budget)
        out, report = optimize(transcript.messages, counter, budget, reserve)
        rendered, system_out = render(transcript, out)
        data = OptimizeReport(
            tokens_before=report.tokens_before + TOKENS_REPLY_PRIMING,
            tokens_before_estimated=report.tokens_before_estimated,
            tokens_after=report.tokens_after + TOKENS_REPLY_PRIMING,
            messages_before=len(messages),
            messages_after=len(rendered),
            removed=max(len(messages) - len(rendered), 0),
            compressed=report.compressed,
            orphans_removed=report.orphans_removed,
            budgets=report.budgets,
        )
        return transcript.format, rendered, system_out, data

    key = dict(
        m=messages,
        s=system,
        w=context_window,
        t=target_ratio,
        sr=summary_ratio,
        r=recent_ratio,
        to=tool_output_max_tokens,
        mm=min_messages,
        model=model,
        f=format,
    )
    page, data = _paged(rt, "optimize", key, page_offset, compute)
    return OptimizeResult(**page.model_dump(), report=data)


def _summary_reserve(msgs: list[Msg], counter: Counter, budget: Budget) -> int:
    """Room kept free for the summary to grow: its share of the target minus what it uses now."""
    _, previous = split_summary([m for m in msgs if m.role == "system"])
    if previous is None:
        return 0
    share = int(budget.context_window * budget.target_ratio * budget.summary_ratio)
    return max(share - counter.count(previous), 0)


# ---------------------------------------------------------------- compact_context


class CompactReportModel(BaseModel):
    action: str = Field(description="compacted, or skipped (see reason).")
    reason: str = Field(description="Why it was skipped (empty when compacted).")
    strategy: str = Field(description="compact (detailed, sectioned) or summarize (short).")
    source: str = Field(description="llm, fallback (made by code after an LLM problem) or none.")
    fallback_reason: str | None = Field(description="Why the LLM was not used (null when it was).")
    incremental: bool = Field(description="True when an earlier summary was folded in.")
    messages_before: int = Field(description="Messages in the input.")
    messages_after: int = Field(description="Messages in the output.")
    tokens_before: int = Field(description="Tokens of the input (see tokens_before_estimated).")
    tokens_before_estimated: bool = Field(description=ESTIMATED)
    tokens_after: int = Field(description="Tokens of the output.")
    ratio: float = Field(description="tokens_after / tokens_before.")
    summary_tokens: int = Field(description="Tokens of the summary message.")
    llm_tokens: int = Field(description="Tokens the LLM call used (prompt + completion).")
    todos_carried: int = Field(description="Open todo items appended to the summary by code.")
    todo_source: str = Field(description="Where the todo items came from.")
    constraints_carried: int = Field(description="User constraint sentences appended verbatim.")
    stored: bool = Field(description="True when the summary was saved under conversation_id.")


class CompactResult(MessagesPage):
    report: CompactReportModel = Field(description="What was done.")


def llm_summarizer(rt: Runtime) -> Summarizer | None:
    """A Summarizer over the configured endpoint, or None when none is configured."""
    from context.llm import LLMConfig, chat

    try:
        config = LLMConfig.from_settings(rt.settings, "compact_context")
    except LLMNotConfigured:
        return None

    def summarize(chat_messages: list[dict[str, Any]], max_tokens: int) -> tuple[str, int]:
        reply = chat(config, chat_messages, max_tokens=max_tokens, temperature=0.2)
        return reply.content or "", reply.total_tokens

    return summarize


def _stored_todos(rt: Runtime, list_id: str | None, client_id: str) -> TodoList | None:
    """The todo list from the todo store, or None when nothing was ever stored under it."""
    stored = todo_store(rt).read(resolve_list_id(rt, list_id, client_id))
    return stored if stored.version > 0 else None


def _store_todos(rt: Runtime, list_id: str | None, client_id: str) -> tuple[list[carryover.Todo] | None, str]:
    """The todo list's items from the todo store (None when it is empty)."""
    stored = _stored_todos(rt, list_id, client_id)
    if stored is None:
        return None, "none"
    return [carryover.Todo(i.content, i.status) for i in stored.items], f"todo list {stored.list_id!r}"


def compact_context(
    messages: MessagesParam,
    strategy: Annotated[
        Literal["auto", "compact", "summarize"],
        Field(
            description="compact: detailed sectioned summary; summarize: short (<200 words); auto: by size."
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
    returns [system..., summary, recent...]. Open todos and the user's constraint sentences are
    carried over verbatim by code. Without an LLM, or when it fails, falls back to truncation
    and says so. auto re-summarises only when enough is new."""
    key = dict(
        m=messages,
        s=system,
        st=strategy,
        w=context_window,
        k=keep_recent_tokens,
        i=instructions,
        c=conversation_id,
        t=todo_list_id,
        model=model,
        f=format,
    )
    args = (
        messages,
        strategy,
        context_window,
        keep_recent_tokens,
        instructions,
        conversation_id,
        todo_list_id,
        model,
        system,
        format,
        rt,
        call,
    )
    page, data = _paged(rt, "compact", key, page_offset, lambda: _compact(*args))
    return CompactResult(**page.model_dump(), report=data)


def _compact(
    messages: list[dict[str, Any]],
    strategy: Any,
    window: int,
    keep_recent: int | None,
    instructions: str | None,
    conversation_id: str | None,
    todo_list_id: str | None,
    model: str | None,
    system: Any,
    fmt: str,
    rt: Runtime,
    call: CallContext,
) -> tuple[Any, ...]:
    transcript = _parse(messages, system, fmt)
    counter = counter_for(model)
    todos, todo_source = _store_todos(rt, todo_list_id, call.client_id)
    prior = Prior(todos=todos, todo_source=todo_source)
    store = context_store(rt) if conversation_id else None
    if store is not None and conversation_id:
        saved = store.get(conversation_id)
        if (
            saved
            and saved.covered_messages <= len(messages)
            and (prefix_hash(messages, saved.covered_messages) == saved.prefix_hash)
        ):
            prior.summary, prior.covered = saved.summary, saved.covered_messages
    call.report(0, 2, "summarising")
    options = CompactOptions(strategy, window, keep_recent, instructions)
    out, report, summary = compact(transcript.messages, counter, options, llm_summarizer(rt), prior)
    stored = False
    if store is not None and conversation_id and summary is not None and report.covered_sources > 0:
        covered = report.covered_sources
        store.put(conversation_id, summary, covered, prefix_hash(messages, covered), report.source)
        stored = True
    rendered, system_out = render(transcript, out)
    data = CompactReportModel(
        **{k: v for k, v in report.__dict__.items() if k in CompactReportModel.model_fields},
        stored=stored,
    )
    data.messages_before, data.messages_after = len(messages), len(rendered)
    return transcript.format, rendered, system_out, data


# ---------------------------------------------------------------- assemble_context


class Reminder(BaseModel):
    kind: str = Field(description="tools, skills, files, todos or tokens.")
    text: str = Field(description="The reminder text.")


class AssembleResult(MessagesPage):
    system_hash: str = Field(description="Hash of the system text: equal across turns within a minute.")
    reminders: list[Reminder] = Field(description="Reminders emitted this turn (each only once).")
    tokens: int = Field(description="Tokens of the assembled context.")
    level: str = Field(description="Context level: info, warning or critical.")


def assemble_context(
    system_prompt: Annotated[str, Field(max_length=200_000, description="Your static system prompt.")],
    messages: MessagesParam,
    conversation_id: Annotated[
        str,
        Field(
            min_length=1,
            max_length=200,
            description="Your conversation's id (reminder state is kept per id).",
        ),
    ] = "default",
    tools: Annotated[
        list[str] | None, Field(description="Names of the tools available now; new ones are announced once.")
    ] = None,
    skills: Annotated[
        list[str] | None, Field(description="Skills available now; new ones are announced once.")
    ] = None,
    files: Annotated[
        list[str] | None, Field(description="Files uploaded so far; new ones are announced once.")
    ] = None,
    todo_list_id: Annotated[
        str | None,
        Field(description="Todo list whose open items are reminded when they change (default list)."),
    ] = None,
    context_window: Annotated[
        int | None, Field(ge=1000, description="Window size: a token warning is added when the level rises.")
    ] = None,
    model: ModelParam = None,
    format: FormatParam = "auto",
    page_offset: PageParam = 0,
    *,
    rt: Runtime,
    call: CallContext,
) -> AssembleResult:
    """Build what to send next with a cache-stable layout: a byte-stable system message (time at minute
    precision, last) and this turn's reminders (new tools/skills/files, todo changes, token warnings)
    appended to the newest user message, each reminder only once."""
    return assemble(
        rt,
        call,
        system_prompt,
        messages,
        conversation_id,
        tools,
        skills,
        files,
        todo_list_id,
        context_window,
        model,
        format,
        page_offset,
        None,
    )


def assemble(
    rt: Runtime,
    call: CallContext,
    system_prompt: str,
    messages: list[dict[str, Any]],
    conversation_id: str,
    tools: list[str] | None,
    skills: list[str] | None,
    files: list[str] | None,
    todo_list_id: str | None,
    context_window: int | None,
    model: str | None,
    fmt: str,
    page_offset: int,
    now: datetime | None,
) -> AssembleResult:
    """assemble_context with an injectable clock (tests)."""
    transcript = _parse(messages, None, fmt)
    if any(m.role == "system" for m in transcript.messages):
        raise InvalidInput("messages contain a system message; pass it as system_prompt instead.")
    counter = counter_for(model)
    sys_text = system_text(system_prompt, now or datetime.now(UTC))
    store = context_store(rt)
    state = store.get_state(conversation_id)
    for kind, items in (("tools", tools), ("skills", skills), ("files", files)):
        if items is not None:
            observe(state, kind, items)
    todo_text = _todo_reminder(rt, todo_list_id, call.client_id, transcript.messages)
    tokens = counter.count(sys_text) + _total(counter, transcript.messages)
    level, level_text = "info", None
    if context_window:
        status = context_level(
            tokens, context_window, rt.settings.context_warning_ratio, rt.settings.context_critical_ratio
        )
        level = status.level
        level_text = f"Context is {status.ratio:.0%} full ({tokens} of {context_window} tokens). {status.recommendation}"
    due = emit(state, todo_text, level if context_window else None, level_text)
    store.put_state(conversation_id, state)
    msgs = transcript.messages
    if due:
        msgs = attach(msgs, reminder_block(due), transcript.format)
    if transcript.format == "openai":
        msgs = [Msg("system", sys_text, changed=True), *msgs]
        rendered, system_out = render(transcript, msgs)
    else:
        rendered, _ = render(transcript, msgs)
        system_out = sys_text
    page = _page(rt, transcript.format, rendered, system_out, page_offset)
    return AssembleResult(
        **page.model_dump(),
        system_hash=text_hash(sys_text),
        reminders=[Reminder(kind=r.kind, text=r.text) for r in due],
        tokens=tokens + sum(counter.count(r.text) for r in due),
        level=level,
    )


def _todo_reminder(rt: Runtime, list_id: str | None, client_id: str, msgs: list[Msg]) -> str | None:
    stored = _stored_todos(rt, list_id, client_id)
    if stored is not None:
        return reminder_of(stored)
    found = carryover.todos_from_transcript(msgs)
    open_items = carryover.open_todos(found or [])
    if not open_items:
        return None
    lines = [f"- [{t.status}] {t.content}" for t in open_items[:20]]
    return "Unfinished todo items:\n" + "\n".join(lines)


def warm_up_tokens(rt: Runtime) -> None:
    """Load the token encoding once at start-up (and look for o200k_base in <data dir>/encodings)."""
    from context.tokens import add_encoding_dir, warm_up

    add_encoding_dir(rt.data_dir / "encodings")
    warm_up()
