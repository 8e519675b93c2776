"""Transcripts in the two formats clients have, one internal form, and back.

- OpenAI Chat Completions: roles system/developer/user/assistant/tool, `tool_calls`, `tool_call_id`.
- Anthropic Messages: roles user/assistant with content blocks (`text`, `tool_use`, `tool_result`,
  ...) and a separate `system`.

`parse()` validates (errors name the message index and the fix) and returns a `Transcript` of
`Msg` in an OpenAI-like shape: an Anthropic user message carrying `tool_result` blocks becomes one
`tool` Msg per result followed by a `user` Msg with the remaining blocks. `render()` turns a
(possibly edited) list of Msg back into the caller's format, reusing the caller's own dicts for
every message that was not changed and writing every changed one from its parts (`Msg.wire_content`,
`context.parts.write_content`). Pure functions, no heavy imports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from context.parts import (
    ContentPart,
    Part,
    Text,
    ToolCall,
    all_parts,
    arguments_text,
    full_text,
    read_content,
    says_something,
    text_of,
    write_content,
)
from foundation.errors import InvalidInput

__all__ = ["Call", "Msg", "Transcript", "arguments_text", "content_text", "message_text", "parse", "render",
           "with_content", "with_parts", "with_text_edited"]

Format = Literal["openai", "anthropic"]
FormatArg = Literal["auto", "openai", "anthropic"]

OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")
ANTHROPIC_ROLES = ("user", "assistant", "system")
_OPENAI_PART_TYPES = {"image_url", "input_audio", "file", "refusal"}
_ANTHROPIC_BLOCK_TYPES = {
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "image",
    "document",
    "server_tool_use",
    "web_search_tool_result",
}


Call = ToolCall  # one tool call made by an assistant message


@dataclass(slots=True)
class Msg:
    """One message in the internal form.

    `content` is the wire value: the text or the list of content parts/blocks other than tool
    calls/results; for a `tool` Msg it is the result's content. `raw` is the caller's dict (for an
    Anthropic tool result: its `tool_result` block). `source` is the caller's message index (-1: made by us).

    Read once from `content` and `calls`, on first use (context/parts.py), and what
    the context code reads: `parts` (typed: text, reasoning, image, document, tool call, tool result,
    opaque), `body` (the content's parts), `text` (their readable text), `full_text` (everything
    that costs tokens: text, then the calls as `name(arguments)` lines) and `says_something`
    (non-blank text or a part that is not text). Change a message with `with_parts` (new parts) or
    `with_content` (a new wire value, read into parts); `render` writes a changed message from its
    parts and calls (`wire_content`), an unchanged one as the caller's own dict.
    """

    role: str
    content: Any
    calls: tuple[Call, ...] = ()
    call_id: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    source: int = -1
    changed: bool = False
    tool_name: str | None = None
    _body: tuple[ContentPart, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _text: str | None = field(default=None, init=False, repr=False, compare=False)
    _full_text: str | None = field(default=None, init=False, repr=False, compare=False)

    # Each view is read once, on first use: a long transcript has many messages never looked at.
    @property
    def body(self) -> tuple[ContentPart, ...]:
        if self._body is None:
            self._body = read_content(self.content)
        return self._body

    @property
    def text(self) -> str:
        if self._text is None:
            content = self.content
            self._text = content if isinstance(content, str) else text_of(self.body)
        return self._text

    @property
    def full_text(self) -> str:
        if self._full_text is None:
            self._full_text = full_text(self.text, self.calls)
        return self._full_text

    @property
    def parts(self) -> tuple[Part, ...]:
        return all_parts(self.body, self.text, self.calls, self.call_id if self.role == "tool" else None)

    @property
    def says_something(self) -> bool:
        return says_something(self.body, self.text, isinstance(self.content, list))

    @property
    def is_chain_head(self) -> bool:
        return self.role == "assistant" and bool(self.calls)

    def wire_content(self) -> Any:
        """The content to render: the parts written back (`parts.write_content`), which `content` is by
        construction: `with_parts` writes it from the new parts, and a content read into parts writes back
        to itself (tests/test_context_parts.py::test_written_parts_are_the_content_they_were_read_from), so
        it is not written a second time here."""
        return self.content


@dataclass
class Transcript:
    format: Format
    messages: list[Msg]
    system_was_list: bool = False


def _fail(index: int, problem: str, fix: str) -> InvalidInput:
    return InvalidInput(f"messages[{index}]: {problem}. {fix}")


# ---------------------------------------------------------------- format detection


def detect_format(messages: list[Any], system: Any = None) -> Format:
    """'openai' or 'anthropic' from the markers present; plain text-only transcripts are 'openai'
    unless a separate `system` was given. Mixed markers raise InvalidInput naming both indexes."""
    openai_at = anthropic_at = None
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        marker = _marker(message)
        if marker == "openai" and openai_at is None:
            openai_at = index
        elif marker == "anthropic" and anthropic_at is None:
            anthropic_at = index
    if openai_at is not None and anthropic_at is not None:
        raise InvalidInput(
            f"messages mix formats: messages[{openai_at}] is OpenAI Chat style and messages[{anthropic_at}] is "
            "Anthropic Messages style. Send one format (set format='openai' or 'anthropic' to force one)."
        )
    if anthropic_at is not None:
        return "anthropic"
    if openai_at is None and system is not None:
        return "anthropic"
    return "openai"


def _marker(message: dict[str, Any]) -> str | None:
    if (
        message.get("role") in ("tool", "developer", "function")
        or "tool_calls" in message
        or "tool_call_id" in message
    ):
        return "openai"
    content = message.get("content")
    if isinstance(content, list):
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in _ANTHROPIC_BLOCK_TYPES:
                return "anthropic"
            if kind in _OPENAI_PART_TYPES:
                return "openai"
    return None


# ---------------------------------------------------------------- parsing


def parse(messages: Any, system: Any = None, fmt: FormatArg = "auto") -> Transcript:
    """Validate and convert the caller's messages (and Anthropic `system`) to the internal form."""
    if not isinstance(messages, list):
        raise InvalidInput("messages must be a list of message objects ({'role': ..., 'content': ...}).")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _fail(
                index, f"is a {type(message).__name__}, not an object", "Send {'role': ..., 'content': ...}"
            )
    chosen: Format = detect_format(messages, system) if fmt == "auto" else fmt
    if chosen == "openai":
        out = _parse_openai(messages)
        if system is not None:
            out.insert(0, Msg("system", _check_system(system), source=-1, raw={}))
        transcript = Transcript("openai", out)
    else:
        transcript = Transcript("anthropic", _parse_anthropic(messages, system), isinstance(system, list))
    _link_results(transcript.messages)
    return transcript


def _check_system(system: Any) -> Any:
    if isinstance(system, str):
        return system
    if isinstance(system, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in system):
        return system
    raise InvalidInput("system must be a string or a list of {'type': 'text', 'text': ...} blocks.")


def _parse_openai(messages: list[dict[str, Any]]) -> list[Msg]:
    out: list[Msg] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in OPENAI_ROLES:
            raise _fail(
                index,
                f"unknown role {role!r}",
                f"Use one of {', '.join(OPENAI_ROLES)} (OpenAI) or user/assistant with content blocks (Anthropic)",
            )
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise _fail(
                index, f"content is a {type(content).__name__}", "Content must be a string or a list of parts"
            )
        if content is None and role in ("user", "system", "developer"):
            raise _fail(index, f"{role} message has no content", "Give it a string content")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise _fail(
                    index,
                    "tool message without tool_call_id",
                    "Set tool_call_id to the id of the call it answers",
                )
            out.append(Msg("tool", content, call_id=call_id, raw=message, source=index))
            continue
        calls = _openai_calls(index, message.get("tool_calls")) if role == "assistant" else ()
        out.append(
            Msg("system" if role == "developer" else role, content, calls=calls, raw=message, source=index)
        )
    return out


def _openai_calls(index: int, raw_calls: Any) -> tuple[Call, ...]:
    if raw_calls is None:
        return ()
    if not isinstance(raw_calls, list):
        raise _fail(
            index, "tool_calls is not a list", "Send tool_calls as a list of {'id', 'function'} objects"
        )
    calls = []
    for call in raw_calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str) or not function.get("name"):
            raise _fail(
                index, "a tool call lacks id or function.name", "Each tool call needs an id and function.name"
            )
        calls.append(Call(call["id"], str(function["name"]), function.get("arguments", ""), call))
    return tuple(calls)


def _parse_anthropic(messages: list[dict[str, Any]], system: Any) -> list[Msg]:
    out: list[Msg] = []
    if system is not None:
        out.append(Msg("system", _check_system(system), source=-1))
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ANTHROPIC_ROLES:
            raise _fail(index, f"unknown role {role!r}", "Anthropic messages use role user or assistant")
        content = message.get("content")
        if isinstance(content, str):
            out.append(Msg(role, content, raw=message, source=index))
            continue
        if not isinstance(content, list):
            raise _fail(
                index,
                f"content is a {type(content).__name__}",
                "Content must be a string or a list of blocks",
            )
        for block in content:
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise _fail(
                    index, "a content block has no 'type'", "Each block needs a type (text, tool_use, ...)"
                )
        if role == "system":
            out.append(Msg("system", _check_system(content), raw=message, source=index))
        elif role == "assistant":
            out.append(_anthropic_assistant(index, message, content))
        else:
            out.extend(_anthropic_user(index, message, content))
    return out


def _anthropic_assistant(index: int, message: dict[str, Any], content: list[dict[str, Any]]) -> Msg:
    calls = []
    for block in content:
        if block["type"] == "tool_use":
            if not isinstance(block.get("id"), str) or not block.get("name"):
                raise _fail(
                    index, "a tool_use block lacks id or name", "Each tool_use block needs an id and a name"
                )
            calls.append(Call(block["id"], str(block["name"]), block.get("input", {}), block))
        elif block["type"] == "tool_result":
            raise _fail(
                index,
                "an assistant message carries a tool_result",
                "Put tool_result blocks in a user message",
            )
    others = [block for block in content if block["type"] != "tool_use"]
    return Msg("assistant", others, calls=tuple(calls), raw=message, source=index)


def _anthropic_user(index: int, message: dict[str, Any], content: list[dict[str, Any]]) -> list[Msg]:
    out: list[Msg] = []
    others = []
    for block in content:
        if block["type"] == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                raise _fail(
                    index,
                    "a tool_result block lacks tool_use_id",
                    "Set tool_use_id to the tool_use it answers",
                )
            out.append(Msg("tool", block.get("content", ""), call_id=call_id, raw=block, source=index))
        elif block["type"] == "tool_use":
            raise _fail(
                index, "a user message carries a tool_use", "Put tool_use blocks in an assistant message"
            )
        else:
            others.append(block)
    if others or not out:
        out.append(Msg("user", others, raw=message, source=index))
    return out


def _link_results(messages: list[Msg]) -> None:
    """Every tool result must answer a call made earlier; fill in the tool's name."""
    names: dict[str, str] = {}
    for msg in messages:
        if msg.role == "assistant":
            names.update((call.id, call.name) for call in msg.calls)
        elif msg.role == "tool":
            if msg.call_id not in names:
                raise _fail(
                    msg.source,
                    f"tool result for {msg.call_id!r} answers a call that was never made before it",
                    "Remove the result or include the assistant message that made the call",
                )
            msg.tool_name = names[msg.call_id or ""]


# ---------------------------------------------------------------- rendering


def render(transcript: Transcript, messages: list[Msg]) -> tuple[list[dict[str, Any]], Any]:
    """The caller's format again: (messages, system). `system` is None for OpenAI (system messages
    stay in the list) and the joined system prompt for Anthropic."""
    if transcript.format == "openai":
        return [_render_openai(msg) for msg in messages], None
    return _render_anthropic(messages, transcript.system_was_list)


def _render_openai(msg: Msg) -> dict[str, Any]:
    if msg.source >= 0 and not msg.changed:
        return msg.raw
    out: dict[str, Any] = dict(msg.raw) if msg.raw else {"role": msg.role}
    out["content"] = msg.wire_content()
    if msg.calls:
        out["tool_calls"] = [_openai_call(call) for call in msg.calls]
    elif out.get("tool_calls"):
        del out["tool_calls"]  # the calls were taken out of the message
    return out


def _openai_call(call: Call) -> Any:
    wire = call.wire
    function = wire.get("function") if isinstance(wire, dict) else None
    if isinstance(function, dict) and (wire.get("id"), function.get("name"), function.get("arguments", "")) == (
            call.id, call.name, call.arguments):
        return wire
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments_text(call.arguments)}}


def _anthropic_call(call: Call) -> Any:
    wire = call.wire
    if isinstance(wire, dict) and (wire.get("id"), wire.get("name"), wire.get("input", {})) == (
            call.id, call.name, call.arguments):
        return wire
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}


def _render_anthropic(messages: list[Msg], system_was_list: bool) -> tuple[list[dict[str, Any]], Any]:
    system_parts = [m.wire_content() for m in messages if m.role == "system"]
    out: list[dict[str, Any]] = []
    group: list[Msg] = []
    for msg in (m for m in messages if m.role != "system"):
        if group and (msg.source != group[0].source or msg.source < 0 or msg.role == "assistant"):
            out.append(_anthropic_group(group))
            group = []
        group.append(msg)
    if group:
        out.append(_anthropic_group(group))
    return out, _join_system(system_parts, system_was_list)


def _anthropic_group(group: list[Msg]) -> dict[str, Any]:
    head = group[0]
    if head.role == "assistant" or (head.source < 0 and not head.raw):
        if head.source >= 0 and not head.changed:
            return head.raw
        return {"role": head.role, "content": _with_uses(head.wire_content(), head.calls)}
    original = head.raw if head.role == "user" else None
    blocks: list[Any] = []
    for msg in group:
        content = msg.wire_content()
        if msg.role == "tool":
            blocks.append(dict(msg.raw, content=content) if msg.changed else msg.raw)
        elif isinstance(content, str):
            if len(group) == 1 and not msg.changed:
                return msg.raw
            blocks.append({"type": "text", "text": content})
        else:
            original = msg.raw
            blocks.extend(content or [])
    if original is not None and not any(m.changed for m in group) and blocks == original.get("content"):
        return original
    return {"role": "user", "content": blocks}


def _with_uses(content: Any, calls: tuple[Call, ...]) -> Any:
    """An Anthropic assistant content with its calls as `tool_use` blocks after the rest."""
    if not calls:
        return content
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}] if content else []
    return [*blocks, *(_anthropic_call(call) for call in calls)]


def _join_system(parts: list[Any], as_list: bool) -> Any:
    if not parts:
        return None
    if len(parts) == 1 and (isinstance(parts[0], list) == as_list):
        return parts[0]
    if not as_list and all(isinstance(p, str) for p in parts):
        return "\n\n".join(parts)
    blocks: list[Any] = []
    for part in parts:
        blocks.extend(part if isinstance(part, list) else [{"type": "text", "text": part}])
    return blocks


# ---------------------------------------------------------------- text views


def content_text(content: Any) -> str:
    """The readable text of a wire content value (string, parts/blocks, nested tool_result content).
    For a Msg, read `msg.text` (made once, from the same parts)."""
    return text_of(read_content(content))


def message_text(msg: Msg) -> str:
    """Everything in the message that costs tokens, as text: `msg.full_text`."""
    return msg.full_text


def with_text_edited(
    msg: Msg, edit: Callable[[str], str | None], only: Callable[[str], bool] = lambda _text: True
) -> Msg | None:
    """A copy of `msg` (marked changed) with `edit` applied to its text: a string content, or each `text`
    block whose text `only` accepts (a block edited to None is dropped). None when nothing is left."""
    if isinstance(msg.content, str):
        edited_content = edit(msg.content)
        return None if edited_content is None else with_content(msg, edited_content)
    parts: list[ContentPart] = []
    for part in msg.body:
        if isinstance(part, Text) and isinstance(part.wire, dict) and only(part.text):
            edited = edit(part.text)
            if edited is None:
                continue
            part = replace(part, text=edited)
        parts.append(part)
    return with_parts(msg, tuple(parts)) if parts else None


def with_content(msg: Msg, content: Any) -> Msg:
    """A copy of `msg` with new content (its parts read again), marked changed."""
    return replace(msg, content=content, changed=True)


def with_parts(msg: Msg, body: tuple[ContentPart, ...]) -> Msg:
    """A copy of `msg` with new parts (its calls kept), marked changed: rendered from these parts."""
    changed = replace(msg, content=write_content(body, msg.content), changed=True)
    changed._body = body
    return changed
