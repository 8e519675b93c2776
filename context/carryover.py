"""What compaction carries over by code, never left to the model: the user's constraint and
preference sentences (verbatim) and the open todo list."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from context.messages import Msg, content_text

CONSTRAINTS_HEADING = "## User constraints and preferences (verbatim)"
TODOS_HEADING = "## Open todos (carried over)"
TODO_TOOLS = {"todo_write", "todowrite", "write_todos", "update_todos"}
MAX_CONSTRAINTS = 80
MAX_SENTENCE_CHARS = 600

_CONSTRAINT = re.compile(
    r"\b(must|must not|mustn't|never|always|don't|do not|should|shouldn't|should not|prefer|prefers|"
    r"preferred|please use|please don't|only use|use only|make sure|ensure|avoid|required|requirement|"
    r"no more than|at most|at least|instead of|i want|i need|i'd like|i would like|remember|keep|stick to)\b"
    r"|不要|必须|总是|一定|务必|禁止|请勿|请用|只用|只能|应该|不能|偏好|喜欢用|优先|记住",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？；])|\n+")


@dataclass(frozen=True)
class Todo:
    content: str
    status: str


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def constraint_sentences(msgs: Iterable[Msg]) -> list[str]:
    """Sentences of user messages that state a constraint or a preference, verbatim, deduplicated."""
    seen: dict[str, None] = {}
    for msg in msgs:
        if msg.role != "user":
            continue
        for sentence in sentences(content_text(msg.content)):
            if len(sentence) <= MAX_SENTENCE_CHARS and _CONSTRAINT.search(sentence):
                seen.setdefault(sentence, None)
    return list(seen)


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
    """The list written by the last todo_write-style tool call in the transcript (None: none)."""
    latest: list[Todo] | None = None
    for msg in msgs:
        for call in msg.calls:
            if call.name.lower() not in TODO_TOOLS:
                continue
            parsed = _todo_items(call.arguments)
            if parsed is not None:
                latest = parsed
    return latest


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


def render_carryover(constraints: list[str], todos: list[Todo], todo_source: str) -> str:
    """The sections appended to every summary."""
    parts = []
    if todos:
        lines = [f"- [{t.status}] {t.content}" for t in todos]
        parts.append(f"{TODOS_HEADING}\nSource: {todo_source}.\n" + "\n".join(lines))
    if constraints:
        kept = constraints[-MAX_CONSTRAINTS:]
        lines = [f"- {c}" for c in kept]
        parts.append(f"{CONSTRAINTS_HEADING}\n" + "\n".join(lines))
    return "\n\n".join(parts)


def todos_from_summary(summary: str) -> list[Todo]:
    out = []
    for line in section_lines(summary, TODOS_HEADING):
        match = re.match(r"\[(\w+)\] (.*)", line)
        if match:
            out.append(Todo(match.group(2), match.group(1)))
    return out
