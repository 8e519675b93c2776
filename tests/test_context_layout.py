"""assemble_context: a 10-turn session keeps the system message byte-stable within a minute and
emits every reminder exactly once."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundation.errors import InvalidInput
from tests.context_checks import chat_api_problems
from tools.context_assemble import assemble
from tools.runtime import CallContext, Runtime

pytestmark = pytest.mark.storage

T0 = datetime(2026, 11, 22, 3, 17, 5, tzinfo=UTC)


@pytest.fixture
def rt(settings: Any) -> Any:
    runtime = Runtime(settings)
    yield runtime
    runtime.close()


def _turn(rt: Runtime, messages: list[dict[str, Any]], now: datetime, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "tools": None,
        "skills": None,
        "files": None,
        "todo_list_id": None,
        "context_window": None,
    }
    args.update(kw)
    return assemble(
        rt,
        CallContext(tool="assemble_context"),
        args.get("system_prompt", "You are a helpful agent."),
        messages,
        args.get("conversation_id", "conv"),
        args["tools"],
        args["skills"],
        args["files"],
        args["todo_list_id"],
        args["context_window"],
        None,
        args.get("fmt", "auto"),
        0,
        now,
    )


def test_ten_turn_session_stable_system_and_reminders_once(rt: Runtime) -> None:
    from tools.todos import resolve_list_id, todo_store

    messages: list[dict[str, Any]] = []
    tools = ["search", "read_file"]
    files: list[str] = []
    hashes, reminders = set(), Counter()
    list_id = resolve_list_id(rt, None, "default")
    for turn in range(10):
        messages.append({"role": "user", "content": f"Turn {turn}: keep going."})
        if turn == 3:
            tools.append("run_bash_command")
        if turn == 5:
            files.append("report.pdf")
        if turn == 6:
            todo_store(rt).write(list_id, [{"content": "Write the report", "status": "in_progress"}])
        window = 100_000 if turn < 8 else 1000  # from turn 8 on, the context is past the warning level
        result = _turn(
            rt,
            messages,
            T0 + timedelta(seconds=5 * turn),
            tools=list(tools),
            files=list(files),
            context_window=window,
        )
        system = result.messages[0]
        assert system["role"] == "system" and system["content"].endswith(
            "Conversation started: 2026-11-22 03:17 UTC (later, the current time is given in a reminder)."
        )
        hashes.add(hashlib.sha256(system["content"].encode()).hexdigest())
        hashes.add(result.system_hash)
        for reminder in result.reminders:
            reminders[(reminder.kind, reminder.text)] += 1
        last = result.messages[-1]
        if result.reminders:
            assert last["role"] == "user" and last["content"].startswith(f"Turn {turn}: keep going.")
            assert "<system-reminder>" in last["content"]
        else:
            assert last == messages[-1]
        messages.append({"role": "assistant", "content": f"Done with turn {turn}." + " padding" * 40 * turn})
    assert len(hashes) == 2  # one full sha256 and the reported short hash: the same text all session
    kinds = Counter(kind for kind, _ in reminders)
    assert all(count == 1 for count in reminders.values()), reminders
    assert kinds["tools"] == 2 and kinds["files"] == 1 and kinds["todos"] == 1 and kinds["tokens"] == 1
    texts = " ".join(text for _, text in reminders)
    assert "run_bash_command" in texts and "report.pdf" in texts and "Write the report" in texts


def test_system_is_byte_identical_for_the_conversation_and_the_time_moves_to_a_reminder(rt: Runtime) -> None:
    """Turns over 25 minutes of simulated clock (some in the same minute, some across an hour): one system
    text all along, with the start time; the current time is told in a reminder whenever the minute moved
    on, exactly once per minute, and never when it did not."""
    messages: list[dict[str, Any]] = []
    systems, told = set(), []
    offsets = [0, 20, 50, 61, 62, 185, 600, 601, 1500]  # seconds after T0 (03:17:05)
    for turn, seconds in enumerate(offsets):
        messages.append({"role": "user", "content": f"Turn {turn}."})
        result = _turn(rt, messages, T0 + timedelta(seconds=seconds), conversation_id="clock")
        systems.add(result.messages[0]["content"])
        told += [r.text for r in result.reminders if r.kind == "time"]
        messages.append({"role": "assistant", "content": "ok"})
    assert len(systems) == 1 and "2026-11-22 03:17" in systems.pop()
    assert told == [f"Current date and time: 2026-11-22 {hm} UTC" for hm in ["03:18", "03:20", "03:27", "03:42"]]
    other = _turn(rt, messages, T0 + timedelta(hours=2), conversation_id="clock", system_prompt="Another prompt.")
    assert "Conversation started: 2026-11-22 05:17" in other.messages[0]["content"]  # a new prompt: a new start


def test_trailing_user_message_and_anthropic(rt: Runtime) -> None:
    call = {"type": "tool_use", "id": "t1", "name": "search", "input": {}}
    msgs = [
        {"role": "user", "content": "find it"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "found"}]},
    ]
    result = _turn(rt, msgs, T0, tools=["search"], fmt="anthropic")
    assert result.format == "anthropic" and result.system.startswith("You are a helpful agent.")
    last = result.messages[-1]
    assert len(result.messages) == 3 and last["role"] == "user"
    assert last["content"][0]["type"] == "tool_result" and "<system-reminder>" in last["content"][-1]["text"]
    openai = _turn(
        rt, [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], T0, files=["a.txt"]
    )
    assert openai.messages[-1]["role"] == "user" and "a.txt" in openai.messages[-1]["content"]


def test_system_messages_in_the_list_are_refused(rt: Runtime) -> None:
    with pytest.raises(InvalidInput, match="system_prompt"):
        _turn(rt, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], T0)


BLANK = st.sampled_from(["", " ", "\n", " \t\n\n  "])
TEXT = st.lists(st.sampled_from(["alpha", "beta", "你好", "Stick to Node 20.", "- item"]), min_size=1, max_size=6).map(" ".join)
# A piece never starts with a blank line of its own (that would not come from joining); it may be
# blank, or end with newlines and spaces.
PIECE = st.one_of(BLANK, st.tuples(TEXT, st.sampled_from(["", "\n", "\n\n", "  ", "\n \n"])).map("".join))
BLANK_START = re.compile(r"\A[ \t]*(\n|\Z)")
BLANK_END = re.compile(r"\n[ \t]*\Z")


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [str(b.get("text", "")) for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prompt=PIECE, last=PIECE, fmt=st.sampled_from(["openai", "anthropic"]), remind=st.booleans())
def test_joining_adds_no_blank_lines_at_the_edges(rt: Runtime, prompt: str, last: str, fmt: str, remind: bool) -> None:
    """The system text (prompt + time) and a user message with reminders appended: no text the joining
    made starts or ends with a blank line, and a blank system prompt contributes nothing."""
    messages = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"}]
    messages.append({"role": "user", "content": last})
    result = _turn(rt, messages, T0, system_prompt=prompt, conversation_id=uuid.uuid4().hex, fmt=fmt,
                   files=["a.txt"] if remind else None)
    system = result.system if fmt == "anthropic" else result.messages[0]["content"]
    assert system.startswith(prompt.rstrip() or "Conversation started:")
    made = [system] + [t for m in result.messages if m not in messages for t in _texts(m["content"])]
    for text in made:
        assert not BLANK_START.match(text) and not BLANK_END.search(text), repr(text)
    assert len(result.reminders) == remind
    if remind or last.strip():  # a blank last message is the caller's, unless the reminder replaced it
        assert chat_api_problems([m for m in result.messages if m["role"] != "system"], result.system, fmt) == []
