"""Independent checks of transcripts in the caller's format (they do not use context.messages)."""

from __future__ import annotations

from typing import Any


def api_problems(messages: list[dict[str, Any]], fmt: str) -> list[str]:
    """What a chat API would reject: unanswered calls, results without their call right before."""
    return _openai_problems(messages) if fmt == "openai" else _anthropic_problems(messages)


def _openai_problems(messages: list[dict[str, Any]]) -> list[str]:
    problems = []
    i = 0
    while i < len(messages):
        message = messages[i]
        if message["role"] == "tool":
            problems.append(f"[{i}] tool result {message.get('tool_call_id')} without its call right before")
            i += 1
            continue
        calls = [c["id"] for c in message.get("tool_calls") or []] if message["role"] == "assistant" else []
        j = i + 1
        answered = []
        while j < len(messages) and messages[j]["role"] == "tool":
            answered.append(messages[j]["tool_call_id"])
            j += 1
        if sorted(answered) != sorted(calls):
            problems.append(f"[{i}] calls {calls} answered by {answered}")
        i = j
    return problems


def _anthropic_problems(messages: list[dict[str, Any]]) -> list[str]:
    problems = []
    previous_calls: list[str] = []
    for i, message in enumerate(messages):
        blocks = message["content"] if isinstance(message["content"], list) else []
        if message["role"] == "assistant":
            if previous_calls:
                problems.append(f"[{i}] calls {previous_calls} never answered")
            previous_calls = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            continue
        results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
        if sorted(results) != sorted(previous_calls):
            problems.append(f"[{i}] results {results} do not match calls {previous_calls}")
        previous_calls = []
    if previous_calls:
        problems.append(f"[end] calls {previous_calls} never answered")
    return problems


def user_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The text of every user message (tool results excluded), in order."""
    out = []
    for message in messages:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            texts = [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"]
            if texts:
                out.append("\n".join(texts))
    return out


def is_subsequence(small: list[Any], big: list[Any]) -> bool:
    it = iter(big)
    return all(any(item == other for other in it) for item in small)


def chat_api_problems(messages: list[dict[str, Any]], system: Any, fmt: str) -> list[str]:
    """Everything a chat API rejects: broken tool chains, empty messages, and for Anthropic a first
    turn that is not a user turn (system excluded)."""
    problems = api_problems(messages, fmt)
    for i, message in enumerate(messages):
        if _is_empty(message):
            problems.append(f"[{i}] empty {message.get('role')} message")
    turns = [m for m in messages if m.get("role") not in ("system", "developer")]
    if fmt == "anthropic" and turns and turns[0]["role"] != "user":
        problems.append(f"first turn is {turns[0]['role']}, not user")
    if fmt == "anthropic" and any(m.get("role") == "system" for m in messages):
        problems.append("a system message inside Anthropic messages")
    return problems


def _is_empty(message: dict[str, Any]) -> bool:
    content = message.get("content")
    if message.get("tool_calls") or message.get("role") == "tool":  # an empty tool result is valid
        return False
    if content is None:
        return True
    if isinstance(content, str):
        return not content.strip()
    if not content:
        return True
    for block in content:
        if not isinstance(block, dict):
            return False
        if block.get("type") != "text" or str(block.get("text", "")).strip():
            return False
    return True


def all_text(messages: list[dict[str, Any]], system: Any) -> str:
    """Every readable string of the output (messages, blocks, tool results, arguments, system)."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in ("role", "type", "id", "tool_use_id", "tool_call_id"):
                    walk(item)

    walk(messages)
    walk(system)
    return "\n".join(out)
