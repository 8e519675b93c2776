"""optimize_context: shrink a conversation without an LLM (thin wrapper over context.optimize)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from context.compact import split_summary
from context.messages import Msg, render
from context.optimize import Budget, optimize
from context.tokens import TOKENS_REPLY_PRIMING, Counter, counter_for
from tools.context_common import (
    TOKENIZER_EXACT,
    USER_WORDS,
    FormatParam,
    MessagesPage,
    MessagesParam,
    ModelParam,
    PageParam,
    SizeReport,
    SystemParam,
    TodoListParam,
    WindowParam,
    paged,
    parse_transcript,
    stored_todos,
    todos_for,
)
from tools.runtime import CallContext, Runtime


class OptimizeReport(SizeReport):
    removed: int = Field(description="Messages removed (orphans and old turns).")
    compressed: int = Field(description="Tool outputs compressed.")
    orphans_removed: int = Field(description="Unanswered tool calls and results without their call, removed.")
    budgets: dict[str, int] = Field(description="The token budgets used (target, system, user_words, recent...).")
    user_words: dict[str, Any] = Field(description=USER_WORDS)
    todos_carried: int = Field(description="Open todo items carried as one reminder at the end.")
    todo_source: str = Field(description="Where the todo items came from (none: nothing open).")
    encoding: str = Field(description="The tokenizer used (cl100k_base or o200k_base).")
    tokenizer_exact: bool = Field(description=TOKENIZER_EXACT)


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
    todo_list_id: TodoListParam = None,
    model: ModelParam = None,
    system: SystemParam = None,
    format: FormatParam = "auto",
    page_offset: PageParam = 0,
    *,
    rt: Runtime,
    call: CallContext,
) -> OptimizeResult:
    """Shrink a conversation without an LLM. The user's own words stay verbatim (pasted logs/files
    in them may be compressed); tool outputs are compressed, unanswered calls and orphaned results
    dropped, then the newest turns kept under the budget. Open todos come back as one reminder at
    the end. Tool chains stay whole: the output is always valid for the chat APIs."""

    budget = Budget(context_window, target_ratio, summary_ratio, recent_ratio, tool_output_max_tokens, min_messages)
    request = OptimizeRequest(messages, system, budget, model, format, todo_list_id,
                              _todo_key(rt, todo_list_id, call.client_id))
    page, data = paged(rt, "optimize", vars(request), page_offset, lambda: _optimized(request, rt, call))
    return OptimizeResult(**page.model_dump(), report=data)


@dataclass(frozen=True)
class OptimizeRequest:
    """What optimize_context was asked (all but the page), and the todo list's version (a later page is
    recomputed when the list changed meanwhile): what `_optimized` reads and what keys the page cache."""

    messages: list[dict[str, Any]]
    system: Any
    budget: Budget
    model: str | None
    fmt: str
    todo_list_id: str | None
    todo_version: int


def _optimized(request: OptimizeRequest, rt: Runtime, call: CallContext) -> tuple[Any, ...]:
    transcript = parse_transcript(request.messages, request.system, request.fmt)
    counter = counter_for(request.model)
    budget = request.budget
    reserve = _summary_reserve(transcript.messages, counter, budget)
    todos, source = todos_for(rt, request.todo_list_id, call.client_id, transcript.messages)
    out, report = optimize(transcript.messages, counter, budget, reserve, todos, source, transcript.format)
    rendered, system_out = render(transcript, out)
    data = OptimizeReport(
        tokens_before=report.tokens_before + TOKENS_REPLY_PRIMING,
        tokens_before_estimated=report.tokens_before_estimated,
        tokens_after=report.tokens_after + TOKENS_REPLY_PRIMING,
        messages_before=len(request.messages),
        messages_after=len(rendered),
        removed=max(len(request.messages) - len(rendered), 0),
        compressed=report.compressed,
        orphans_removed=report.orphans_removed,
        budgets=report.budgets,
        user_words=report.words.as_dict(),
        todos_carried=report.todos_carried,
        todo_source=report.todo_source,
        encoding=counter.name,
        tokenizer_exact=not counter.estimate,
    )
    return transcript.format, rendered, system_out, data


def _summary_reserve(msgs: list[Msg], counter: Counter, budget: Budget) -> int:
    """Room kept free for the summary to grow: its share of the target minus what it uses now."""
    _, previous = split_summary([m for m in msgs if m.role == "system"])
    if previous is None:
        return 0
    share = int(budget.context_window * budget.target_ratio * budget.summary_ratio)
    return max(share - counter.count(previous), 0)


def _todo_key(rt: Runtime, list_id: str | None, client_id: str) -> int:
    """The todo list's version: a later page is recomputed when the list changed meanwhile."""
    stored = stored_todos(rt, list_id, client_id)
    return stored.version if stored is not None else 0
