"""What optimize and compact carry over by code, never left to the model: the user's own words
(verbatim), the open todo list (one reminder block, or a summary section), and the chat-API
shape of the result (no empty messages, a user turn first)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from context.messages import Msg, with_text_edited
from context.tokens import Counter
from context.userwords import WordsReport, prose_sentences, tier

WORDS_HEADING = "## The user's own words (verbatim, oldest first)"
OLD_WORDS_HEADINGS = ("## User constraints and preferences (verbatim)",)  # written by earlier versions
TODOS_HEADING = "## Open todos (carried over)"
TODO_TOOLS = {"todo_write", "todowrite", "write_todos", "update_todos"}
REMINDER_MARK = "Open todos (carried over"
_REMINDER = re.compile(r"\n*<system-reminder>\nOpen todos \(carried over.*?</system-reminder>", re.S)
OMITTED_NOTE = "(Earlier messages of this conversation were left out to fit the context window.)"
MAX_REMINDER_ITEMS = 30


@dataclass(frozen=True)
class Todo:
    content: str
    status: str


def section_lines(summary: str, heading: str) -> list[str]:
    """The `- ` lines under `heading` in an earlier summary (to carry them over again)."""
    if heading not in summary:
        return []
    body = summary.split(heading, 1)[1]
    lines = []
    for line in body.splitlines()[1:]:
        if line.startswith("#"):
            break
        if line.startswith("- "):
            lines.append(line[2:])
    return lines


def todos_from_transcript(msgs: Iterable[Msg]) -> list[Todo] | None:
    """The list written by the last todo_write-style tool call in the transcript, or carried by
    a newer reminder of ours (None: neither)."""
    for msg in reversed(list(msgs)):  # the newest first: no need to parse the older ones
        for call in reversed(msg.calls):
            if call.name.lower() in TODO_TOOLS:
                parsed = _todo_items(call.arguments)
                if parsed is not None:
                    return parsed
        if msg.role == "user" and REMINDER_MARK in (text := msg.text):
            return _reminder_items(text)  # our own reminder carried the list this far
    return None


def _reminder_items(text: str) -> list[Todo]:
    block = text[text.rindex(REMINDER_MARK) :].split("</system-reminder>", 1)[0]
    out = []
    for line in block.splitlines()[1:]:
        match = re.match(r"- \[(\w+)\] (.*)", line)
        if match:
            out.append(Todo(match.group(2), match.group(1)))
    return out


def _todo_items(arguments: object) -> list[Todo] | None:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    items = arguments.get("todos", arguments.get("items"))
    if not isinstance(items, list):
        return None
    out = []
    for item in items:
        if isinstance(item, dict) and item.get("content"):
            out.append(Todo(str(item["content"]), str(item.get("status", "pending"))))
    return out


def open_todos(todos: Iterable[Todo]) -> list[Todo]:
    return [t for t in todos if t.status != "completed"]


def render_carryover(words: list[str], todos: list[Todo], todo_source: str) -> str:
    """The sections appended to every summary: open todos, then the user's carried words."""
    parts = []
    if todos:
        lines = [f"- [{t.status}] {t.content}" for t in todos]
        parts.append(f"{TODOS_HEADING}\nSource: {todo_source}.\n" + "\n".join(lines))
    if words:
        parts.append(f"{WORDS_HEADING}\n" + "\n".join(f"- {w}" for w in words))
    return "\n\n".join(parts)


def carried_words(summary: str) -> list[str]:
    """The user's sentences an earlier summary carried (any heading version)."""
    out: list[str] = []
    for heading in (WORDS_HEADING, *OLD_WORDS_HEADINGS):
        out += section_lines(summary, heading)
    return out


def todos_from_summary(summary: str) -> list[Todo]:
    out = []
    for line in section_lines(summary, TODOS_HEADING):
        match = re.match(r"\[(\w+)\] (.*)", line)
        if match:
            out.append(Todo(match.group(2), match.group(1)))
    return out


# ---------------------------------------------------------------- the todo reminder


def todo_reminder(todos: list[Todo], source: str) -> str | None:
    """One reminder block of the open todos (None when nothing is open)."""
    if not todos:
        return None
    lines = [f"- [{t.status}] {t.content[:300]}" for t in todos[:MAX_REMINDER_ITEMS]]
    if len(todos) > MAX_REMINDER_ITEMS:
        lines.append(f"- … and {len(todos) - MAX_REMINDER_ITEMS} more")
    body = f"{REMINDER_MARK} from {source}; keep working on them):\n" + "\n".join(lines)
    return f"<system-reminder>\n{body}\n</system-reminder>"


def reminder_positions(msgs: list[Msg]) -> list[int]:
    """Indexes of the user messages that carry one of our todo reminders."""
    return [k for k, m in enumerate(msgs) if m.role == "user" and REMINDER_MARK in m.text]


def without_reminders(msg: Msg) -> Msg | None:
    """`msg` with our todo reminder blocks removed (None when nothing else is left)."""
    return with_text_edited(msg, _unremind, only=lambda text: REMINDER_MARK in text)


def _unremind(text: str) -> str | None:
    rest = _REMINDER.sub("", text)
    return rest if rest.strip() else None


def strip_reminders(msgs: list[Msg]) -> list[Msg]:
    out = []
    carrying = set(reminder_positions(msgs))
    for k, msg in enumerate(msgs):
        if k in carrying:
            kept = without_reminders(msg)
            if kept is not None:
                out.append(kept)
        else:
            out.append(msg)
    return out


# ---------------------------------------------------------------- chat-API shape


def is_empty(msg: Msg) -> bool:
    """A message the chat APIs reject as empty: no calls and no text or other content."""
    if msg.role == "tool" or msg.calls:
        return False
    content = msg.content
    if isinstance(content, list):
        return all(
            isinstance(b, dict) and b.get("type") == "text" and not str(b.get("text", "")).strip() for b in content
        )
    return not msg.says_something


def api_shape(msgs: list[Msg], fmt: str) -> list[Msg]:
    """No empty messages, and (Anthropic) the first turn after the system prompt is a user turn:
    a short note is put first when it would not be."""
    out = [m for m in msgs if not is_empty(m)]
    first = next((k for k, m in enumerate(out) if m.role != "system"), None)
    if fmt == "anthropic" and first is not None and out[first].role != "user":
        out.insert(first, Msg("user", OMITTED_NOTE, changed=True))
    return out


# ---------------------------------------------------------------- the user's words in a summary


def words_to_carry(
    earlier: list[str], old_users: list[Msg], counter: Counter, limit: int, words: WordsReport
) -> list[str]:
    """The user's sentences a summary carries verbatim: those an earlier summary carried, then
    every sentence of the summarised user messages, deduplicated, in order. Over `limit` tokens,
    sentences go by tier (small talk first), the oldest first; drops are reported."""
    found = [s for m in old_users for s in prose_sentences(m.text)]
    chosen = list(dict.fromkeys([*earlier, *found]))
    costs = {s: counter.count(s) + 2 for s in chosen}
    over = sum(costs.values()) - limit
    if over <= 0:
        return chosen
    gone: set[str] = set()
    for _, _, sentence in sorted((tier(s), k, s) for k, s in enumerate(chosen)):
        if over <= 0:
            break
        gone.add(sentence)
        over -= costs[sentence]
        words.drop(sentence)
    return [s for s in chosen if s not in gone]
