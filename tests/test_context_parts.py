"""Typed message parts (context/parts.py, Msg.parts/text/full_text): read once at the edge, the same
text as the wire-form flattening they replace, and parse -> render still byte-identical."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from context import carryover
from context.messages import Msg, parse, render, with_content, with_parts
from context.parts import (
    Document,
    Image,
    Opaque,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
    read_content,
    write_content,
)
from context.userwords import without_sentences
from tests.json_strategies import json_values

# ---------------------------------------------------------------- the flattening the parts replace (oracle)


def old_content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for part in content:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict):
                pieces.append(_old_part_text(part))
        return "\n".join(p for p in pieces if p)
    return json.dumps(content, ensure_ascii=False, default=str)


def _old_part_text(part: dict[str, Any]) -> str:
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind == "thinking":
        return str(part.get("thinking", ""))
    if kind == "tool_result":
        return old_content_text(part.get("content"))
    if kind in ("image", "image_url"):
        return "[image]"
    if kind in ("document", "file"):
        return "[document]"
    return ""


def old_says_something(content: Any) -> bool:
    if old_content_text(content).strip():
        return True
    return isinstance(content, list) and any(isinstance(p, dict) and p.get("type") != "text" for p in content)


# ---------------------------------------------------------------- strategies

WORDS = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(["", " ", "\n", "fix it", "你好"])
TEXT_PART = st.builds(lambda t: {"type": "text", "text": t}, WORDS)
IMAGE_URL = st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})
IMAGE = st.just({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}})
DOCUMENT = st.just({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"}})
THINKING = st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "s"}, WORDS)
ODD = st.sampled_from([{"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}},
                       {"type": "refusal", "refusal": "no"}, {"type": "redacted_thinking", "data": "x"},
                       {"no_type": 1}, {"type": 3}, {"type": "text"}, {"type": "text", "text": 5}])
LEAF_PART = TEXT_PART | IMAGE_URL | IMAGE | DOCUMENT | THINKING | ODD | WORDS
NESTED = st.builds(lambda c: {"type": "tool_result", "tool_use_id": "t", "content": c},
                   WORDS | st.lists(LEAF_PART, max_size=3) | st.none())
CONTENT = (st.none() | WORDS | st.lists(LEAF_PART | NESTED | st.integers() | st.none(), max_size=5)
           | json_values(max_leaves=5))


@given(content=CONTENT, role=st.sampled_from(["user", "assistant", "tool", "system"]))
@settings(max_examples=300, deadline=None)
def test_the_parts_hold_the_same_text_as_the_old_flattening(content: Any, role: str) -> None:
    msg = Msg(role, content, call_id="t" if role == "tool" else None)
    assert msg.text == old_content_text(content)
    assert msg.says_something == old_says_something(content)
    changed = with_content(msg, content)
    assert changed.text == msg.text and changed.changed


CALLS = st.lists(st.tuples(st.text(min_size=1, max_size=6), json_values(max_leaves=4) | st.text(max_size=20)),
                 max_size=3)


@given(content=CONTENT, calls=CALLS)
@settings(max_examples=200, deadline=None)
def test_full_text_is_the_text_then_one_line_per_call(content: Any, calls: list[tuple[str, Any]]) -> None:
    typed = tuple(ToolCall(f"c{k}", name, args) for k, (name, args) in enumerate(calls))
    msg = Msg("assistant", content, calls=typed)
    lines = "\n".join(
        f"{c.name}({c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments, ensure_ascii=False, default=str)})"
        for c in typed)
    text = old_content_text(content)
    assert msg.full_text == (f"{text}\n{lines}" if text and lines else text or lines)
    assert msg.parts[len(msg.body):] == typed


# ---------------------------------------------------------------- writing parts back to the wire


@given(content=CONTENT)
@settings(max_examples=400, deadline=None)
def test_written_parts_are_the_content_they_were_read_from(content: Any) -> None:
    assert _same(write_content(read_content(content), content), content)


def _shouted(part: Any) -> Any:
    """A transformer over parts: upper-case every text, nested results included."""
    if isinstance(part, (Text, Reasoning)):
        return replace(part, text=part.text.upper())
    if isinstance(part, ToolResult):
        inner = tuple(_shouted(p) for p in part.parts)
        return replace(part, parts=inner, text="\n".join(p.text for p in inner if p.text))
    return part


@given(content=CONTENT, role=st.sampled_from(["user", "assistant", "tool", "system"]))
@settings(max_examples=300, deadline=None)
def test_a_transformer_that_changes_parts_changes_what_is_rendered(content: Any, role: str) -> None:
    """Rendering goes from the parts: the written content reads back as the changed parts, everything
    else in each item (cache_control, signatures, images) kept."""
    msg = Msg(role, content, call_id="t" if role == "tool" else None)
    changed = with_parts(msg, tuple(_shouted(p) for p in msg.body))
    written = changed.wire_content()
    assert read_content(written) == changed.body and Msg(role, written).text == changed.text
    assert isinstance(written, str) == isinstance(content, str)
    if isinstance(content, list):
        assert len(written) == len(content)
        for before, after in zip(content, written, strict=True):
            if isinstance(before, dict):
                assert set(before) <= set(after) | {"text", "thinking", "content"}


def test_an_edited_text_block_keeps_its_other_keys_and_the_calls_stay() -> None:
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": [{"type": "text", "text": "run it", "cache_control": {"type": "ephemeral"}},
                                                  {"type": "tool_use", "id": "u1", "name": "grep", "input": {"q": "x"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": "found"}]}]
    transcript = parse(messages, None, "anthropic")
    head = transcript.messages[1]
    edited = with_parts(head, (replace(head.body[0], text="RUN IT"),))
    rendered, _ = render(transcript, [transcript.messages[0], edited, transcript.messages[2]])
    assert rendered[1] == {"role": "assistant", "content": [
        {"type": "text", "text": "RUN IT", "cache_control": {"type": "ephemeral"}},
        {"type": "tool_use", "id": "u1", "name": "grep", "input": {"q": "x"}}]}
    assert rendered[2] == messages[2]


# ---------------------------------------------------------------- wire round trips


@st.composite
def openai_transcripts(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        out.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(WORDS)})
    for k in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["user", "user_parts", "assistant", "chain"]))
        if kind == "user":
            out.append({"role": "user", "content": draw(WORDS)})
        elif kind == "user_parts":
            out.append({"role": "user", "content": draw(st.lists(TEXT_PART | IMAGE_URL, min_size=1, max_size=3))})
        elif kind == "assistant":
            out.append({"role": "assistant", "content": draw(WORDS)})
        else:
            call = {"id": f"call_{k}", "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": draw(WORDS)})}}
            out.append({"role": "assistant", "content": draw(st.none() | WORDS), "tool_calls": [call]})
            result = draw(WORDS | st.lists(TEXT_PART, min_size=1, max_size=2))
            out.append({"role": "tool", "tool_call_id": f"call_{k}", "content": result})
    return out


@st.composite
def anthropic_transcripts(draw: st.DrawFn) -> tuple[list[dict[str, Any]], Any]:
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for k in range(draw(st.integers(1, 6))):
        blocks: list[Any] = [{"type": "tool_result", "tool_use_id": i,
                              "content": draw(WORDS | st.lists(TEXT_PART | IMAGE, min_size=1, max_size=2))}
                             for i in pending]
        blocks += draw(st.lists(TEXT_PART | IMAGE | DOCUMENT, max_size=2))
        user: Any = blocks if blocks else draw(WORDS)
        out.append({"role": "user", "content": user})
        pending = [f"toolu_{k}_{j}" for j in range(draw(st.integers(0, 2)))]
        said = draw(st.lists(THINKING | TEXT_PART, max_size=2))
        uses = [{"type": "tool_use", "id": i, "name": "grep", "input": {"q": draw(WORDS)}} for i in pending]
        if said or uses:
            out.append({"role": "assistant", "content": said + uses})
        else:
            out.append({"role": "assistant", "content": draw(WORDS)})
            pending = []
    system = draw(st.none() | WORDS | st.lists(TEXT_PART, min_size=1, max_size=2))
    return out, system


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, ensure_ascii=False) == json.dumps(b, ensure_ascii=False)


@given(messages=openai_transcripts())
@settings(max_examples=150, deadline=None)
def test_openai_parse_then_render_is_byte_identical(messages: list[dict[str, Any]]) -> None:
    transcript = parse(messages, None, "auto")
    rendered, system = render(transcript, transcript.messages)
    assert system is None and _same(rendered, messages)
    edited = [with_content(m, m.content) for m in transcript.messages]  # the serialise path of changed messages
    assert _same(render(transcript, edited)[0], messages)
    for msg, wire in zip(transcript.messages, messages, strict=True):
        if wire["role"] == "tool":
            assert msg.parts == (ToolResult(wire["tool_call_id"], msg.body, msg.text),)
        assert [p.id for p in msg.parts if isinstance(p, ToolCall)] == [c["id"] for c in wire.get("tool_calls") or []]


@given(case=anthropic_transcripts())
@settings(max_examples=150, deadline=None)
def test_anthropic_parse_then_render_is_byte_identical(case: tuple[list[dict[str, Any]], Any]) -> None:
    messages, system = case
    transcript = parse(messages, system, "anthropic")
    rendered, system_out = render(transcript, transcript.messages)
    assert _same(rendered, messages) and _same(system_out, system)
    edited = [with_content(m, m.content) for m in transcript.messages]  # the serialise path of changed messages
    rendered_again, system_again = render(transcript, edited)
    assert _same(system_again, system) and len(rendered_again) == len(messages)
    assert all(_same(a.get("content"), b["content"]) or a["role"] == "user" for a, b in zip(rendered_again, messages, strict=True))
    uses = [b["id"] for m in messages if isinstance(m["content"], list) for b in m["content"] if b["type"] == "tool_use"]
    assert [p.id for m in transcript.messages for p in m.parts if isinstance(p, ToolCall)] == uses
    results = [p.call_id for m in transcript.messages for p in m.parts if isinstance(p, ToolResult)]
    assert results == [b["tool_use_id"] for m in messages if isinstance(m["content"], list)
                       for b in m["content"] if b["type"] == "tool_result"]


def test_each_wire_part_has_its_type() -> None:
    msg = Msg("user", ["a", {"type": "text", "text": "b"}, {"type": "thinking", "thinking": "c"},
                       {"type": "image_url", "image_url": {"url": "u"}}, {"type": "file", "file": {}},
                       {"type": "input_audio"}, {"type": "tool_result", "tool_use_id": "x", "content": "d"}, 7])
    assert [type(p) for p in msg.parts] == [Text, Text, Reasoning, Image, Document, Opaque, ToolResult, Opaque]
    assert msg.text == "a\nb\nc\n[image]\n[document]\nd"
    assert msg.parts[-1] == Opaque(None) and msg.parts[-1].wire == 7  # kept, so that it is written back
    assert Msg("user", {"k": 1}).parts == (Opaque(None, '{"k": 1}'),)


# ---------------------------------------------------------------- text edits (with_text_edited) as the code they replace


def _old_without_sentences(msg: Msg, gone: list[str]) -> Msg | None:
    def cut(text: str) -> str:
        for sentence in gone:
            text = text.replace(sentence, "", 1)
        return re.sub(r"[ \t]{2,}", " ", text).strip()

    if isinstance(msg.content, str):
        text = cut(msg.content)
        return with_content(msg, text) if text else None
    blocks = []
    for block in msg.content or []:
        if isinstance(block, dict) and block.get("type") == "text":
            text = cut(str(block.get("text", "")))
            if not text:
                continue
            if text != str(block.get("text", "")):  # a text left as it was keeps the caller's block as it was
                block = {**block, "text": text}
        blocks.append(block)
    return with_content(msg, blocks) if blocks else None


def _old_without_reminders(msg: Msg) -> Msg | None:
    content = msg.content
    if isinstance(content, str):
        rest = carryover._REMINDER.sub("", content)
        return None if not rest.strip() else with_content(msg, rest)
    blocks = []
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text" and carryover.REMINDER_MARK in str(block.get("text")):
            text = carryover._REMINDER.sub("", str(block.get("text", "")))
            if text.strip():
                blocks.append({**block, "text": text} if text != str(block.get("text", "")) else block)
            continue
        blocks.append(block)
    return None if not blocks else with_content(msg, blocks)


REMINDER = carryover.todo_reminder([carryover.Todo("ship it", "pending")], "the todo store") or ""
SAYING = st.sampled_from(["Use Python 3.11.", "Keep it short.", "你好。", " ", "", "x  y"])
USER_TEXT = st.lists(SAYING | st.just(REMINDER), max_size=4).map(" ".join)
USER_BLOCK = st.builds(lambda t: {"type": "text", "text": t}, USER_TEXT) | IMAGE | ODD
USER_CONTENT = st.none() | USER_TEXT | st.lists(USER_BLOCK | USER_TEXT, max_size=4)


@given(content=USER_CONTENT, gone=st.lists(SAYING, max_size=3))
@settings(max_examples=300, deadline=None)
def test_text_edits_do_what_the_code_they_replace_did(content: Any, gone: list[str]) -> None:
    msg = Msg("user", content)
    for new, old in ((without_sentences(msg, gone), _old_without_sentences(msg, gone)),
                     (carryover.without_reminders(msg), _old_without_reminders(msg))):
        assert (new is None) == (old is None)
        if new is not None and old is not None:
            assert _same(new.content, old.content) and new.changed == old.changed
