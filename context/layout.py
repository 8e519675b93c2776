"""Cache-stable prompt assembly.

The system message is byte-identical for a conversation's life: the caller's system prompt, the
skill catalog as it was when the conversation started, then the start time (minute precision),
last. Everything that changes from turn to turn (the current time once the minute has moved on,
new tools/skills/files, recalled facts, todos, token warnings) goes into reminders appended to the
newest user message (or a trailing user message when the transcript does not end with one), so the
cached prefix of the conversation is never invalidated.

Reminder state uses the two-field dedupe: for each kind the state keeps `known_<kind>` (all
items seen) and `new_<kind>` (seen since the last emission). Observing adds unseen items to
both; emitting reminds of `new_<kind>` once and clears it. Todo and token-level reminders are
emitted when their text/level changes. Pure functions over a plain dict state.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from context.messages import Msg, with_content

KINDS = ("tools", "skills", "files")
_LABELS = {
    "tools": "New tools are available: {items}. Use them when they fit the task.",
    "skills": "New skills are available: {items}. Read a skill's instructions before using it.",
    "files": "New files were uploaded: {items}. Read or search them when relevant.",
}
MAX_KNOWN = 2000
REMINDER_OPEN = "<system-reminder>"
REMINDER_CLOSE = "</system-reminder>"


def minute(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def system_text(system_prompt: str, started: str, catalog: str = "") -> str:
    """The system prompt, the skill catalog, and the conversation's start time (`minute()` text), last
    (a blank prompt or catalog adds nothing: no leading blank line)."""
    stamp = f"Conversation started: {started} UTC (later, the current time is given in a reminder)."
    return "\n\n".join(part for part in (system_prompt.rstrip(), catalog.strip(), stamp) if part)


def conversation_start(state: dict[str, Any], prompt: str, now: datetime, catalog: str) -> tuple[str, str]:
    """(start minute, catalog) fixed when this conversation first assembled with this system prompt: a new
    prompt under the same id starts a new conversation. Records both in `state`."""
    key = text_hash(prompt)
    if state.get("prompt_hash") != key or "started" not in state:
        state.update(prompt_hash=key, started=minute(now), catalog=catalog, told_time=minute(now))
    return str(state["started"]), str(state.get("catalog", ""))


def time_reminder(state: dict[str, Any], now: datetime) -> Reminder | None:
    """"Current date and time: ..." when the minute differs from the last one the model was told."""
    current = minute(now)
    if current == state.get("told_time"):
        return None
    state["told_time"] = current
    return Reminder("time", f"Current date and time: {current} UTC")


def tell_once(state: dict[str, Any], key: str, items: list[str]) -> list[str]:
    """The items not yet told under `key` in this conversation (now recorded as told; bounded)."""
    told = state.setdefault(key, [])
    new = [item for item in dict.fromkeys(items) if item not in told]
    told.extend(new)
    del told[:-MAX_KNOWN]
    return new


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def observe(state: dict[str, Any], kind: str, items: Iterable[str]) -> None:
    """Record items of `kind`; the unseen ones become `new_<kind>` (to be reminded once)."""
    known = state.setdefault(f"known_{kind}", [])
    new = state.setdefault(f"new_{kind}", [])
    seen = set(known)
    for item in items:
        item = str(item).strip()[:200]
        if item and item not in seen:
            known.append(item)
            new.append(item)
            seen.add(item)
    del known[:-MAX_KNOWN]  # bounded state: the oldest names are forgotten first


@dataclass
class Reminder:
    kind: str
    text: str


def emit(
    state: dict[str, Any], todo_text: str | None, level: str | None, level_text: str | None
) -> list[Reminder]:
    """The reminders due now; clears `new_*` and remembers the todo text and level emitted."""
    out: list[Reminder] = []
    for kind in KINDS:
        new = state.get(f"new_{kind}") or []
        if new:
            out.append(Reminder(kind, _LABELS[kind].format(items=", ".join(new[:30]))))
            state[f"new_{kind}"] = []
    if todo_text and todo_text != state.get("last_todo"):
        out.append(Reminder("todos", todo_text))
    state["last_todo"] = todo_text
    if level is not None:
        if level != "info" and level != state.get("last_level") and level_text:
            out.append(Reminder("tokens", level_text))
        state["last_level"] = level
    return out


def reminder_block(reminders: list[Reminder]) -> str:
    body = "\n".join(r.text for r in reminders)
    return f"{REMINDER_OPEN}\n{body}\n{REMINDER_CLOSE}"


def attach(msgs: list[Msg], block: str, fmt: str) -> list[Msg]:
    """Append the reminder block to the newest user message (a blank one is replaced by it), or add
    a trailing user message."""
    if not msgs or msgs[-1].role != "user":
        if fmt == "openai":
            return [*msgs, Msg("user", block, changed=True)]
        # Anthropic: join the user message that carries the last tool results (same source index).
        source = msgs[-1].source if msgs and msgs[-1].role == "tool" else -1
        return [*msgs, Msg("user", [{"type": "text", "text": block}], source=source, changed=True)]
    last = msgs[-1]
    if isinstance(last.content, str):
        new_content: Any = f"{last.content}\n\n{block}" if last.content.strip() else block
    else:
        new_content = [*(last.content or []), {"type": "text", "text": block}]
    return [*msgs[:-1], with_content(last, new_content)]
