"""compact_context: split a transcript into system / old / recent, replace *old* by a summary.

The summary comes from the configured LLM (a `Summarizer` callable, injected) or, when that is
missing or fails, from code (a truncation fallback, reported as such). Either way the open todo
list and the user's constraint sentences are appended verbatim by code. Incremental: an earlier
summary (ours, found in the system messages, or passed in from the store) is folded into the new
one, with the seed's triggers for `auto`; those triggers only decide when compaction is optional:
a conversation over its context window is always compacted, and a result still over the window
says what is too big (`fits_window`, `reason`). Pure apart from the injected summarizer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from context import carryover
from context.compress import shorten
from context.messages import Msg, arguments_text, with_content
from context.optimize import SUMMARY_HEADING, chains, compressed_output, keep_last_user
from context.tokens import Counter, lower_bound, message_tokens, total_tokens
from context.userwords import WordsReport, pasted, shrink_blobs
from foundation.errors import GeneralAgentError

Strategy = Literal["auto", "compact", "summarize"]
Summarizer = Callable[[list[dict[str, Any]], int], tuple[str, int]]
"""(chat messages, max_tokens) -> (text, tokens used); raises GeneralAgentError on failure."""

FIRST_TRIGGER_MESSAGES = 20
NEW_MESSAGES_TRIGGER = 10
NEW_TOKENS_RATIO_TRIGGER = 0.5
AUTO_COMPACT_TOKENS = 6000
LLM_INPUT_MAX_TOKENS = 24_000
RECENT_MIN_MESSAGES = 10
RECENT_WINDOW_SHARE = 0.15
RECENT_MAX_SHARE = 0.5
RECENT_TOOL_OUTPUT_MAX = 2000
WORDS_MAX_SHARE = 0.2  # of the window, for the user's sentences carried verbatim
FIRST_MAX_SHARE = 0.1  # of the window, for the first request kept after the summary
_HEADING_LINE = re.compile(r"(?m)^# Conversation summary")

COMPACT_PROMPT = """You summarise an agent conversation so the work can continue in a fresh context.
Write a detailed Markdown summary with exactly these sections:
## Primary request and intent
## Key technical concepts
## Files and code sections (paths, important snippets)
## Errors and fixes
## Problem solving
## User constraints and preferences
## Pending tasks
## Current work
## Next step
Under "User constraints and preferences" quote verbatim, one per line, every instruction,
constraint, preference or fact the user stated, also those said in passing (a language, a
version, a limit, who decides what); leave out greetings and thanks. Keep names, paths, numbers and commands exact. Write in the conversation's language. If a previous
summary is given, merge it with the newer messages into one summary."""

SUMMARIZE_PROMPT = """Summarise this agent conversation in under 200 words: the user's goal, what was
done, the current state and the next step. Keep names, paths and numbers exact. Write in the
conversation's language. If a previous summary is given, merge it with the newer messages.
Then add a section "## User constraints and preferences" quoting verbatim, one per line, every
instruction, constraint, preference or fact the user stated (this section does not count
towards the 200 words)."""


@dataclass(frozen=True)
class CompactOptions:
    strategy: Strategy = "auto"
    context_window: int = 128_000
    keep_recent_tokens: int | None = None
    instructions: str | None = None
    force: bool = False
    fmt: str = "openai"  # the caller's format: Anthropic needs a user turn first


@dataclass
class CompactReport:
    action: str = "compacted"  # compacted | skipped
    reason: str = ""  # why skipped; and why the result is still over the window (when it is)
    strategy: str = "auto"
    source: str = "none"  # llm | fallback | none
    fallback_reason: str | None = None
    incremental: bool = False
    messages_before: int = 0
    messages_after: int = 0
    tokens_before: int = 0
    tokens_before_estimated: bool = False
    tokens_after: int = 0
    ratio: float = 1.0
    fits_window: bool = True
    old_messages: int = 0
    recent_messages: int = 0
    summary_tokens: int = 0
    llm_tokens: int = 0
    todos_carried: int = 0
    todo_source: str = "none"
    constraints_carried: int = 0  # the user's sentences appended by code (the summary left them out)
    covered_sources: int = 0
    words: WordsReport = field(default_factory=WordsReport)


@dataclass
class Prior:
    """An earlier summary from the store: it stands for the caller's first `covered` messages."""

    summary: str | None = None
    covered: int = 0
    todos: list[carryover.Todo] | None = None  # open items from the todo store (None: no store)
    todo_source: str = "todo store"


@dataclass
class Split:
    system: list[Msg]
    previous: str | None
    old: list[Msg]
    recent: list[Msg]
    clean: list[Msg] = field(default_factory=list)
    counted: dict[int, int] = field(default_factory=dict)  # exact sizes of the recent messages


def split_summary(system: list[Msg]) -> tuple[list[Msg], str | None]:
    """System messages without our earlier summary, and that summary's text (None: none)."""
    kept, previous = [], None
    for msg in system:
        text = msg.text
        match = _HEADING_LINE.search(text) if previous is None else None
        if match is None:
            kept.append(msg)
            continue
        previous = text[match.start() :]
        rest = text[: match.start()].rstrip()
        if rest:
            kept.append(with_content(msg, rest))
    return kept, previous


def split(msgs: list[Msg], counter: Counter, options: CompactOptions, prior: Prior) -> Split:
    units, _broken = chains(msgs)  # broken chains (unanswered calls, orphaned results) are dropped
    system_units = [u for u in units if msgs[u[0]].role == "system"]
    system, previous = split_summary([msgs[u[0]] for u in system_units])
    others = [u for u in units if msgs[u[0]].role != "system"]
    if previous is None and prior.summary and prior.covered > 0:
        previous = prior.summary
        others = [u for u in others if msgs[u[0]].source >= prior.covered]
    counted: dict[int, int] = {}
    recent_units = _recent(msgs, others, counter, options, counted)
    recent_set = {i for u in recent_units for i in u}
    old = [msgs[i] for u in others for i in u if i not in recent_set]
    if previous is not None:  # the first request was kept verbatim after that summary: not new
        first = first_request(msgs)
        old = [m for m in old if m is not first]
    recent = [msgs[i] for i in sorted(recent_set)]
    clean = [msgs[i] for u in units for i in u]
    return Split(system, previous, old, recent, clean, counted)


def _recent(
    msgs: list[Msg],
    others: list[list[int]],
    counter: Counter,
    options: CompactOptions,
    counted: dict[int, int],
) -> list[list[int]]:
    want = options.keep_recent_tokens
    if want is None:
        want = int(options.context_window * RECENT_WINDOW_SHARE)
    cap = max(want, int(options.context_window * RECENT_MAX_SHARE))
    chosen: list[list[int]] = []
    count = tokens = 0
    for unit in reversed(others):
        if count >= RECENT_MIN_MESSAGES and tokens >= want:
            break
        if tokens + sum(lower_bound(msgs[i].full_text) for i in unit) > cap:
            break
        sizes = {i: message_tokens(counter, msgs[i]) for i in unit}
        counted.update(sizes)
        cost = sum(sizes.values())
        if tokens + cost > cap:
            break
        chosen.append(unit)
        count += len(unit)
        tokens += cost
    return chosen[::-1]


def _skip_reason(parts: Split, counter: Counter, options: CompactOptions, tokens: int) -> str | None:
    """Why not to compact (None: compact). The auto triggers apply only while the conversation fits
    its window: one that does not is compacted however few its messages."""
    if not parts.old:
        return "Nothing old to summarise: every message fits in the recent part."
    if options.force or options.strategy != "auto" or tokens > options.context_window:
        return None
    if parts.previous is None:
        total = len(parts.old) + len(parts.recent)
        if total < FIRST_TRIGGER_MESSAGES:
            return f"Only {total} messages; the first summary is made at {FIRST_TRIGGER_MESSAGES} or more."
        return None
    summary_tokens = max(counter.count(parts.previous), 1)
    new_tokens = tokens_upto(counter, parts.old, int(summary_tokens * NEW_TOKENS_RATIO_TRIGGER))
    if len(parts.old) < NEW_MESSAGES_TRIGGER or new_tokens / summary_tokens <= NEW_TOKENS_RATIO_TRIGGER:
        return (
            f"{len(parts.old)} new messages ({new_tokens} tokens) since the last summary ({summary_tokens} "
            f"tokens); re-summarising needs {NEW_MESSAGES_TRIGGER}+ messages and new/summary tokens > "
            f"{NEW_TOKENS_RATIO_TRIGGER}. Pass strategy='compact' or 'summarize' to force."
        )
    return None


def compact(
    msgs: list[Msg],
    counter: Counter,
    options: CompactOptions,
    summarizer: Summarizer | None,
    prior: Prior | None = None,
) -> tuple[list[Msg], CompactReport, str | None]:
    """(messages, report, summary text or None when skipped)."""
    prior = prior or Prior()
    report = CompactReport(messages_before=len(msgs))
    parts = split(msgs, counter, options, prior)
    report.words.count_all(msgs, [k for k, m in enumerate(msgs) if m.role == "user"])
    report.tokens_before, report.tokens_before_estimated = total_tokens(counter, msgs, parts.counted, {})
    report.incremental = parts.previous is not None
    report.old_messages, report.recent_messages = len(parts.old), len(parts.recent)
    skip = _skip_reason(parts, counter, options, report.tokens_before)
    if skip is not None:
        report.action, report.reason, report.strategy = "skipped", skip, options.strategy
        out = _finish(carryover.api_shape(parts.clean, options.fmt), counter, report)
        return out, _fit(out, counter, options.context_window, None, report), None
    strategy = _resolve(options.strategy, parts, counter)
    report.strategy = strategy
    body = _llm_body(parts, counter, options, strategy, summarizer, report)
    if body is None:
        body = fallback_body(parts, counter, report.fallback_reason or "no LLM")
        report.source = "fallback"
    summary = _with_carryover(body, parts, prior, report, counter, options.context_window)
    summary_msg = Msg("system", summary, changed=True)
    kept = _kept(parts, summary_msg, counter, options.context_window, report.words)
    out = carryover.api_shape([*parts.system, summary_msg, *kept], options.fmt)
    report.summary_tokens = counter.count(summary)
    report.covered_sources = _covered(parts)
    out = _finish(out, counter, report)
    if report.tokens_after >= report.tokens_before:  # e.g. a forced compaction of a few short messages
        out = _not_smaller(parts, counter, report, options)
        return out, _fit(out, counter, options.context_window, None, report), None
    return out, _fit(out, counter, options.context_window, summary_msg, report), summary


_FIT_ADVICE = {
    "system messages": "The system messages take the most: shorten them.",
    "summary": "The summary takes the most: strategy='summarize' makes a short one.",
    "newest user message": "The newest user message takes the most: shorten it.",
    "other kept messages": "The messages kept verbatim take the most (up to half the window, or keep_recent_tokens "
    "when larger): lower keep_recent_tokens.",
}


def _fit(out: list[Msg], counter: Counter, window: int, summary: Msg | None, report: CompactReport) -> CompactReport:
    """Sets `fits_window`; when the result is still over the window, `reason` says what it is made of."""
    report.fits_window = report.tokens_after <= window
    if report.fits_window:
        return report
    newest = next((m for m in reversed(out) if m.role == "user"), None)
    sizes = dict.fromkeys(_FIT_ADVICE, 0)
    for msg in out:
        part = "summary" if msg is summary else "system messages" if msg.role == "system" else (
            "newest user message" if msg is newest else "other kept messages")
        sizes[part] += message_tokens(counter, msg)
    parts = ", ".join(f"{name} {n}" for name, n in sizes.items() if n)
    advice = _FIT_ADVICE[max(sizes, key=lambda k: sizes[k])]
    note = (f"Still over context_window: {report.tokens_after} tokens for a window of {window} ({parts}). "
            f"{advice} Or use a model with a larger window.")
    report.reason = f"{report.reason} {note}".strip()
    return report


def _kept(parts: Split, summary: Msg, counter: Counter, window: int, words: WordsReport) -> list[Msg]:
    """The first request and the recent messages, kept after the summary. The newest user message,
    when it is not among the recent ones, is cut to the room left in the window (at most half of it)."""
    recent = _trim_recent(carryover.strip_reminders(parts.recent), counter)
    first = _first_kept(parts.clean, recent, counter, window)
    newest = next((m for m in reversed(parts.clean) if m.role == "user"), None)
    if first and newest is not None and first[0].source == newest.source:
        first = []  # the first request is also the newest: keep_last_user keeps it
    used = sum(message_tokens(counter, m) for m in [*parts.system, summary, *first, *recent])
    limit = min(int(window * RECENT_MAX_SHARE), window - used)
    return [*first, *keep_last_user(parts.clean, recent, counter, limit, words)]


def _not_smaller(parts: Split, counter: Counter, report: CompactReport, options: CompactOptions) -> list[Msg]:
    """The messages unchanged, reported as skipped: the summary would not have made them shorter."""
    report.action, report.reason = "skipped", (
        f"Not compacted: the summary plus the kept messages would be {report.tokens_after} tokens, not fewer "
        f"than the {report.tokens_before} they replace. The messages are returned unchanged.")
    report.covered_sources = 0
    return _finish(carryover.api_shape(parts.clean, options.fmt), counter, report)


def _covered(parts: Split) -> int:
    """How many of the caller's leading messages the summary stands for (the rest stay verbatim)."""
    recent = [m.source for m in parts.recent if m.source >= 0]
    if recent:
        return min(recent)
    return max((m.source for m in parts.old), default=-1) + 1


def _finish(out: list[Msg], counter: Counter, report: CompactReport) -> list[Msg]:
    report.messages_after = len(out)
    report.tokens_after = sum(message_tokens(counter, m) for m in out)
    report.ratio = round(report.tokens_after / max(report.tokens_before, 1), 4)
    return out


def _resolve(strategy: Strategy, parts: Split, counter: Counter) -> str:
    if strategy != "auto":
        return strategy
    previous = counter.count(parts.previous or "")
    size = previous + tokens_upto(counter, parts.old, AUTO_COMPACT_TOKENS - previous)
    return "compact" if size > AUTO_COMPACT_TOKENS else "summarize"


def tokens_upto(counter: Counter, msgs: list[Msg], limit: int) -> int:
    """The messages' tokens when at most `limit`, else some number above `limit` (counting stops
    there; cheap lower bounds first, so a huge message is not tokenised to learn it is too big)."""
    floor = 0
    for msg in reversed(msgs):
        floor += lower_bound(msg.full_text)
        if floor > limit:
            return floor
    total = 0
    for msg in msgs:
        total += message_tokens(counter, msg)
        if total > limit:
            break
    return total


def _trim_recent(recent: list[Msg], counter: Counter) -> list[Msg]:
    out = []
    for msg in recent:
        if msg.role == "tool":
            small, _ = compressed_output(msg.text, RECENT_TOOL_OUTPUT_MAX, counter)
            if small is not None:
                msg = with_content(msg, small)
        out.append(msg)
    return out


# ---------------------------------------------------------------- the LLM summary


def transcript_for_llm(msgs: list[Msg], counter: Counter, budget: int) -> str:
    """The old messages as compact text for the summariser: the oldest lines for about 2/3 of
    `budget` tokens and the newest for 1/3, with a marker for the lines between (never read)."""
    head, used = _lines(msgs, counter, budget * 2 // 3)
    tail, _ = _lines(msgs[used:][::-1], counter, budget - sum(n for _, n in head))
    tail.reverse()
    omitted = len(msgs) - len(head) - len(tail)
    middle = [f"…[{omitted} messages omitted from the middle]…"] if omitted else []
    return "\n".join([line for line, _ in head] + middle + [line for line, _ in tail])


def _lines(msgs: list[Msg], counter: Counter, budget: int) -> tuple[list[tuple[str, int]], int]:
    """(line, tokens) for the messages in order while they fit in `budget`; and how many were used."""
    out: list[tuple[str, int]] = []
    left = budget
    for msg in msgs:
        line = _line(msg, counter)
        tokens = counter.count(line)
        if tokens > left:
            break
        out.append((line, tokens))
        left -= tokens
    return out, len(out)


def _line(msg: Msg, counter: Counter) -> str:
    if msg.role == "tool":
        result = shorten(msg.text, 150, counter.count)
        return f"[tool result {msg.tool_name or ''}] {result}"
    text = shorten(msg.text, 1500, counter.count)
    calls = "; ".join(f"{c.name}({arguments_text(c.arguments)[:200]})" for c in msg.calls)
    return f"[{msg.role}] {text}" + (f"\n[calls] {calls}" if calls else "")


def _strip_carryover(summary: str) -> str:
    for heading in (carryover.TODOS_HEADING, carryover.WORDS_HEADING, *carryover.OLD_WORDS_HEADINGS):
        summary = summary.split(heading, 1)[0]
    return summary.strip()


def _llm_body(
    parts: Split,
    counter: Counter,
    options: CompactOptions,
    strategy: str,
    summarizer: Summarizer | None,
    report: CompactReport,
) -> str | None:
    if summarizer is None:
        report.fallback_reason = (
            "No LLM endpoint is configured: set GENERALAGENT_LLM_BASE_URL and GENERALAGENT_LLM_MODEL (or, for "
            "compact_context alone, GENERALAGENT_LLM_CHAT_BASE_URL and GENERALAGENT_LLM_CHAT_MODEL) and, if the "
            "endpoint needs one, its API key in the server's environment, then restart the server."
        )
        return None
    prompt = COMPACT_PROMPT if strategy == "compact" else SUMMARIZE_PROMPT
    if options.instructions:
        prompt += f"\nAdditional instructions: {options.instructions}"
    user = ""
    if parts.previous:
        user += f"Previous summary:\n{_strip_carryover(parts.previous)}\n\n"
    user += "Conversation to summarise:\n" + transcript_for_llm(parts.old, counter, LLM_INPUT_MAX_TOKENS)
    chat = [{"role": "system", "content": prompt}, {"role": "user", "content": user}]
    try:
        text, used = summarizer(chat, 3000 if strategy == "compact" else 400)
    except GeneralAgentError as exc:
        report.fallback_reason = str(exc)
        return None
    report.llm_tokens = used
    text = _strip_carryover(_HEADING_LINE.sub("", text or "", count=1))
    if not text:
        report.fallback_reason = "The LLM returned an empty summary."
        return None
    report.source = "llm"
    return text


# ---------------------------------------------------------------- fallback and carry-over

_PATH = re.compile(
    r"(?<![\w/.-])(?:[\w.-]+/)+[\w.-]+\.\w{1,8}\b|\b[\w-]+\.(?:py|ts|js|md|json|toml|yaml|yml|txt|rs|go)\b"
)


def fallback_body(parts: Split, counter: Counter, reason: str) -> str:
    """A summary made by code: the first request, the earlier summary, files and tools seen."""
    lines = [f"_(Made without an LLM: {reason} Older messages were truncated.)_"]
    first = first_request(parts.old)
    if first is not None:
        text = first.text
        lines.append("## First request in the truncated part\n" + shorten(text, 300, counter.count))
    if parts.previous:
        earlier = _strip_carryover(_HEADING_LINE.sub("", parts.previous, count=1))
        lines.append("## Earlier summary\n" + shorten(earlier, 1500, counter.count))
    tools: dict[str, int] = {}
    for msg in parts.old:
        for call in msg.calls:
            tools[call.name] = tools.get(call.name, 0) + 1
    files = files_mentioned(parts.old)
    if files:
        lines.append("## Files mentioned\n" + ", ".join(files[:40]))
    if tools:
        lines.append(
            "## Tools used\n"
            + ", ".join(f"{k} ×{v}" for k, v in sorted(tools.items(), key=lambda x: -x[1])[:20])
        )
    lines.append(f"{len(parts.old)} older messages were removed.")
    return "\n\n".join(lines)


FILE_SCAN_CHARS = 300_000


def files_mentioned(msgs: list[Msg]) -> list[str]:
    """Paths mentioned in the newest messages (about FILE_SCAN_CHARS of their text: a regex over a
    whole long transcript would take seconds), in order of first mention."""
    texts: list[str] = []
    size = 0
    for msg in reversed(msgs):
        texts.append(message_text_short(msg))
        size += len(texts[-1])
        if size >= FILE_SCAN_CHARS:
            break
    files: dict[str, None] = {}
    for text in reversed(texts):
        for match in _PATH.findall(text):
            files.setdefault(match, None)
    return list(files)


def message_text_short(msg: Msg) -> str:
    text = msg.text
    if len(text) > 4000:
        text = text[:4000].rsplit(None, 1)[0]
    return text + " " + " ".join(arguments_text(c.arguments)[:400] for c in msg.calls)


def _with_carryover(
    body: str, parts: Split, prior: Prior, report: CompactReport, counter: Counter, window: int
) -> str:
    previous = parts.previous or ""
    first = first_request(parts.clean)
    old_users = [m for m in parts.old if m.role == "user" and m is not first]
    for msg in old_users:  # pasted blobs are summarised, not carried: report them as compressed
        text = msg.text
        report.words.compressed(text, pasted(text))
    limit = int(window * WORDS_MAX_SHARE)
    words = carryover.words_to_carry(carryover.carried_words(previous), old_users, counter, limit, report.words)
    missing = [w for w in words if w not in body]  # the code guarantees what the summary left out
    todos, source = _todos(parts, prior, previous)
    report.todos_carried, report.todo_source, report.constraints_carried = len(todos), source, len(missing)
    extra = carryover.render_carryover(missing, todos, source)
    return f"{SUMMARY_HEADING}\n\n{body}" + (f"\n\n{extra}" if extra else "")


def first_request(msgs: list[Msg]) -> Msg | None:
    """The conversation's first user message that says something (it is kept after the summary,
    never summarised away; an empty or blank one before it asks for nothing)."""
    return next((m for m in msgs if m.role == "user" and m.says_something), None)


def _first_kept(clean: list[Msg], recent: list[Msg], counter: Counter, window: int) -> list[Msg]:
    """The first user request, verbatim apart from big pasted blobs, when it is not in `recent`
    (matched by source and not by identity: a message there may be a cut copy; when it is also the
    newest user message, `_kept` leaves it to `keep_last_user`)."""
    first = first_request(clean)
    if first is None or any(m.role == "user" and m.source == first.source for m in recent):
        return []
    if not isinstance(first.content, str):
        return [first]
    text, _ = shrink_blobs(first.content, RECENT_TOOL_OUTPUT_MAX // 4, counter.count)
    text = shorten(text, int(window * FIRST_MAX_SHARE), counter.count, "; the first request was over its share")
    return [first if text == first.content else with_content(first, text)]


def _todos(parts: Split, prior: Prior, previous: str) -> tuple[list[carryover.Todo], str]:
    if prior.todos is not None:
        return carryover.open_todos(prior.todos), prior.todo_source
    found = carryover.todos_from_transcript(parts.clean)
    if found is not None:
        return carryover.open_todos(found), "the last todo_write call in the transcript"
    earlier = carryover.todos_from_summary(previous)
    if earlier:
        return carryover.open_todos(earlier), "the previous summary"
    return [], "none"
