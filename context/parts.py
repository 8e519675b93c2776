"""Typed parts of a message: what it holds, read once from the caller's content value.

A message's wire content (a string, or a list of OpenAI parts / Anthropic blocks) is read into
parts here (`read_content`), once, on first use (context/messages.py); compaction, optimisation and
token counting use the parts and the text they yield instead of walking the wire form again, and
`write_content` writes parts back to the wire for rendering. Each part read from the wire keeps the
item it was read from (`wire`, not compared): written back unchanged while the part still reads the
same, else rebuilt from the part's fields (keeping the item's other keys), so
`write_content(read_content(c), c) == c` for every content value (byte-identical round trips) and a
part that a transformer changed is rendered as changed. Pure functions, no heavy imports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MADE: Any = type("Made", (), {"__repr__": lambda self: "MADE"})()
"""The `wire` of a part made by code rather than read from the caller's content."""


def _wire() -> Any:
    return field(default=MADE, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Text:
    """Plain text (a string content, a string part, or a `text` part/block)."""

    text: str
    wire: Any = _wire()


@dataclass(frozen=True, slots=True)
class Reasoning:
    """An Anthropic `thinking` block."""

    text: str
    wire: Any = _wire()


@dataclass(frozen=True, slots=True)
class Image:
    """An `image` block or an `image_url` part."""

    text: str = "[image]"
    wire: Any = _wire()


@dataclass(frozen=True, slots=True)
class Document:
    """A `document` block or a `file` part."""

    text: str = "[document]"
    wire: Any = _wire()


@dataclass(frozen=True, slots=True)
class Opaque:
    """Anything else (audio, refusal, redacted thinking, server tools, a list item that is neither text
    nor an object): no readable text; or a content value that is neither a string nor a list (its JSON)."""

    kind: str | None
    text: str = ""
    wire: Any = _wire()


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call made by an assistant message (`wire`: the caller's OpenAI call or Anthropic block)."""

    id: str
    name: str
    arguments: Any  # JSON text (OpenAI) or an object (Anthropic input)
    wire: Any = _wire()


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's result: the parts of its content, and their text."""

    call_id: str | None
    parts: tuple[ContentPart, ...]
    text: str
    wire: Any = _wire()


Part = Text | Reasoning | Image | Document | Opaque | ToolCall | ToolResult
ContentPart = Text | Reasoning | Image | Document | Opaque | ToolResult

_JSON = json.JSONEncoder(ensure_ascii=False, default=str)  # what json.dumps(..., ensure_ascii=False, default=str) builds


def read_content(content: Any) -> tuple[ContentPart, ...]:
    """The parts of a content value (None: no parts; a list item that is neither text nor an object is an
    Opaque part without text)."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (Text(content, content),)
    if isinstance(content, list):
        return tuple(_read_item(item) for item in content)
    return (Opaque(None, json.dumps(content, ensure_ascii=False, default=str), content),)


def _read_item(item: Any) -> ContentPart:
    if isinstance(item, str):
        return Text(item, item)
    if not isinstance(item, dict):
        return Opaque(None, "", item)
    kind = item.get("type")
    if kind == "text":
        return Text(str(item.get("text", "")), item)
    if kind == "thinking":
        return Reasoning(str(item.get("thinking", "")), item)
    if kind in ("image", "image_url"):
        return Image(wire=item)
    if kind in ("document", "file"):
        return Document(wire=item)
    if kind == "tool_result":
        inner = read_content(item.get("content"))
        return ToolResult(item.get("tool_use_id"), inner, text_of(inner), item)
    return Opaque(kind if isinstance(kind, str) else None, "", item)


def write_content(parts: tuple[ContentPart, ...], like: Any) -> Any:
    """The wire content of `parts`, in the shape of `like` (the content they were read from): a string
    for one text part of a string content, the value itself for a non-list content, else a list."""
    if not parts and (like is None or isinstance(like, str)):
        return None if like is None else ""
    if len(parts) == 1 and not isinstance(like, list) and like is not None:
        only = parts[0]
        if isinstance(like, str) and isinstance(only, Text):
            return only.text
        if isinstance(only, Opaque) and only.wire is like:
            return like
    return [write_part(part) for part in parts]


def write_part(part: ContentPart) -> Any:
    """One list item: the item the part was read from while it still reads the same, else made anew."""
    wire = part.wire
    if wire is not MADE and _read_item(wire) == part:
        return wire
    keep = wire if isinstance(wire, dict) else {}
    if isinstance(part, Text):
        return part.text if isinstance(wire, str) else {**keep, "type": "text", "text": part.text}
    if isinstance(part, Reasoning):
        return {**keep, "type": "thinking", "thinking": part.text}
    if isinstance(part, ToolResult):
        like = keep.get("content", [])
        return {**keep, "type": "tool_result", "tool_use_id": part.call_id,
                "content": write_content(part.parts, like)}
    return wire if wire is not MADE else {"type": "text", "text": part.text}


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
    """Non-blank text, or (list content) any part that is not text: an image, a file, audio (a list item
    that is not even an object says nothing)."""
    return (bool(text) and not text.isspace()) or (is_list and any(_is_something(part) for part in parts))


def _is_something(part: ContentPart) -> bool:
    return not isinstance(part, Text) and not (isinstance(part, Opaque) and part.kind is None
                                               and part.wire is not MADE and not isinstance(part.wire, dict))


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
