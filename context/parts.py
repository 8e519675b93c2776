"""Typed parts of a message: what it holds, read once from the caller's content value.

A message's wire content (a string, or a list of OpenAI parts / Anthropic blocks) is read into
parts here, once, when a `Msg` is made (context/messages.py); compaction, optimisation and token
counting then use the parts and the text they yield instead of walking the wire form again.
The wire form itself is kept unchanged on the `Msg` for rendering (byte-identical round trips).
Pure functions, no heavy imports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Text:
    """Plain text (a string content, a string part, or a `text` part/block)."""

    text: str


@dataclass(frozen=True, slots=True)
class Reasoning:
    """An Anthropic `thinking` block."""

    text: str


@dataclass(frozen=True, slots=True)
class Image:
    """An `image` block or an `image_url` part."""

    text: str = "[image]"


@dataclass(frozen=True, slots=True)
class Document:
    """A `document` block or a `file` part."""

    text: str = "[document]"


@dataclass(frozen=True, slots=True)
class Opaque:
    """Anything else (audio, refusal, redacted thinking, server tools): no readable text; or a
    content value that is neither a string nor a list (its JSON)."""

    kind: str | None
    text: str = ""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call made by an assistant message."""

    id: str
    name: str
    arguments: Any  # JSON text (OpenAI) or an object (Anthropic input)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's result: the parts of its content, and their text."""

    call_id: str | None
    parts: tuple[Part, ...]
    text: str


Part = Text | Reasoning | Image | Document | Opaque | ToolCall | ToolResult
ContentPart = Text | Reasoning | Image | Document | Opaque | ToolResult

_JSON = json.JSONEncoder(ensure_ascii=False, default=str)  # what json.dumps(..., ensure_ascii=False, default=str) builds


def read_content(content: Any) -> tuple[ContentPart, ...]:
    """The parts of a content value (None: no parts; items that are neither text nor objects are skipped)."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (Text(content),)
    if isinstance(content, list):
        return tuple(_read_item(item) for item in content if isinstance(item, (str, dict)))
    return (Opaque(None, json.dumps(content, ensure_ascii=False, default=str)),)


def _read_item(item: str | dict[str, Any]) -> ContentPart:
    if isinstance(item, str):
        return Text(item)
    kind = item.get("type")
    if kind == "text":
        return Text(str(item.get("text", "")))
    if kind == "thinking":
        return Reasoning(str(item.get("thinking", "")))
    if kind in ("image", "image_url"):
        return Image()
    if kind in ("document", "file"):
        return Document()
    if kind == "tool_result":
        inner = read_content(item.get("content"))
        return ToolResult(item.get("tool_use_id"), inner, text_of(inner))
    return Opaque(kind if isinstance(kind, str) else None)


def text_of(parts: tuple[ContentPart, ...]) -> str:
    """The readable text of the parts, joined by newlines (a part without text adds nothing)."""
    if len(parts) == 1:
        return parts[0].text
    return "\n".join(part.text for part in parts if part.text)


def arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else _JSON.encode(arguments)


def calls_text(calls: tuple[ToolCall, ...]) -> str:
    """The calls as `name(arguments)` lines."""
    return "\n".join(f"{c.name}({arguments_text(c.arguments)})" for c in calls)


def says_something(parts: tuple[ContentPart, ...], text: str, is_list: bool) -> bool:
    """Non-blank text, or (list content) any part that is not text: an image, a file, audio."""
    return (bool(text) and not text.isspace()) or (is_list and any(not isinstance(part, Text) for part in parts))


def full_text(text: str, calls: tuple[ToolCall, ...]) -> str:
    """Everything that costs tokens: the text, then one `name(arguments)` line per call."""
    if not calls:
        return text
    lines = calls_text(calls)
    return f"{text}\n{lines}" if text else lines


def all_parts(body: tuple[ContentPart, ...], text: str, calls: tuple[ToolCall, ...], result_of: str | None) -> tuple[Part, ...]:
    """A message's parts, typed: the body then the calls; a tool's result (`result_of` its call id) as one ToolResult."""
    if result_of is not None:
        return (ToolResult(result_of, body, text),)
    return (*body, *calls)
