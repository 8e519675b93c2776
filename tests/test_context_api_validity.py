"""Every output of optimize and compact, in both formats and all strategies, with and without an LLM
(the local stub: a normal summary, one that omits everything, an empty one, an error), is valid
for the chat APIs: tool chains whole, no empty messages, a user turn first (Anthropic)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from context.compact import CompactOptions, Summarizer, compact
from context.llm import LLMConfig, chat
from context.messages import parse, render
from context.optimize import Budget, optimize
from context.tokens import counter_for
from tests.context_checks import chat_api_problems
from tests.fake_llm import MODEL, FakeLLM, Reply, completion, error_body, start_fake_llm

COUNTER = counter_for(None)
WORDS = st.sampled_from(["alpha", "beta", "file", "test", "fix", "你好", "世界", "Stick to Node 20.", "请用繁体中文回答。"])
TEXT = st.lists(WORDS, min_size=0, max_size=20).map(" ".join)  # may be empty
RESULT = st.one_of(TEXT, st.integers(1, 300).map(lambda n: json.dumps({"ok": True, "items": list(range(n))})))


@st.composite
def transcripts(draw: Any) -> list[tuple[Any, ...]]:
    """Abstract turns: text (possibly empty) from either side, tool chains (some calls unanswered,
    some interrupted by the user), todo_write calls and pasted logs; may start with the assistant."""
    out: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(["user", "assistant", "chain", "chain", "todo", "paste"]))
        if kind in ("user", "assistant"):
            out.append((kind, draw(TEXT)))
        elif kind == "paste":
            out.append(("user", "Look at this:\n```\n" + "log line 42 failed\n" * draw(st.integers(1, 400)) + "```"))
        elif kind == "todo":
            items = [{"content": f"task {k}", "status": draw(st.sampled_from(["pending", "completed"]))} for k in range(3)]
            out.append(("chain", None, [True], [json.dumps({"ok": True})], None, ("todo_write", {"todos": items})))
        else:
            n = draw(st.integers(1, 3))
            answered = draw(st.lists(st.booleans(), min_size=n, max_size=n))
            results = [draw(RESULT) for _ in range(n)]
            out.append(("chain", draw(st.one_of(st.none(), TEXT)), answered, results, draw(st.sampled_from([None, "user"])), ("run", {})))
    return out


def to_openai(evs: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    for k, ev in enumerate(evs):
        if ev[0] != "chain":
            msgs.append({"role": ev[0], "content": ev[1]})
            continue
        _, text, answered, results, interrupt, (name, args) = ev
        ids = [f"call_{k}_{i}" for i in range(len(answered))]
        fn = {"name": name, "arguments": json.dumps(args)}
        msgs.append({"role": "assistant", "content": text, "tool_calls": [{"id": c, "type": "function", "function": fn} for c in ids]})
        if interrupt:
            msgs.append({"role": "user", "content": "wait"})
        msgs += [{"role": "tool", "tool_call_id": c, "content": r} for c, ok, r in zip(ids, answered, results, strict=True) if ok]
    return msgs


def to_anthropic(evs: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    for k, ev in enumerate(evs):
        if ev[0] != "chain":
            msgs.append({"role": ev[0], "content": [{"type": "text", "text": ev[1]}] if ev[1] else ev[1]})
            continue
        _, text, answered, results, interrupt, (name, args) = ev
        ids = [f"toolu_{k}_{i}" for i in range(len(answered))]
        blocks = ([{"type": "text", "text": text}] if text else []) + [
            {"type": "tool_use", "id": c, "name": name, "input": args} for c in ids
        ]
        msgs.append({"role": "assistant", "content": blocks})
        if interrupt:
            msgs.append({"role": "user", "content": "wait"})
        res = [{"type": "tool_result", "tool_use_id": c, "content": r} for c, ok, r in zip(ids, answered, results, strict=True) if ok]
        if res:
            msgs.append({"role": "user", "content": res})
    return msgs


def _case(evs: list[tuple[Any, ...]], fmt: str) -> tuple[list[dict[str, Any]], Any]:
    if fmt == "openai":
        return to_openai(evs), None
    return to_anthropic(evs), "You are helpful."


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(evs=transcripts(), fmt=st.sampled_from(["openai", "anthropic"]), window=st.integers(1000, 20_000), tool_max=st.integers(20, 400), min_messages=st.integers(0, 12))
def test_optimize_output_is_valid_for_the_chat_apis(evs: Any, fmt: str, window: int, tool_max: int, min_messages: int) -> None:
    messages, system = _case(evs, fmt)
    transcript = parse(messages, system)
    budget = Budget(window, tool_output_max_tokens=tool_max, min_messages=min_messages)
    out, report = optimize(transcript.messages, COUNTER, budget, fmt=transcript.format)
    rendered, system_out = render(transcript, out)
    assert chat_api_problems(rendered, system_out, fmt) == [], rendered
    reminders = sum("Open todos (carried over" in json.dumps(m, ensure_ascii=False) for m in rendered)
    assert reminders <= 1
    again, _ = optimize(parse(rendered, system_out).messages, COUNTER, budget, fmt=transcript.format)
    assert sum("Open todos (carried over" in json.dumps(render(transcript, [m])[0], ensure_ascii=False) for m in again) <= 1
    assert report.words.sentences >= report.words.dropped >= 0


@pytest.fixture(scope="module")
def stub() -> Iterator[FakeLLM]:
    state, stop = start_fake_llm()
    yield state
    stop()


STUB_REPLIES = {
    "summary": Reply(200, completion("## Primary request and intent\nRefactor.\n## User constraints and preferences\n- Stick to Node 20.")),
    "omits everything": Reply(200, completion("Work went on.")),
    "empty": Reply(200, completion("")),
    "error": Reply(503, error_body(503, "overloaded")),
}


def _summarizer(stub: FakeLLM) -> Summarizer:
    config = LLMConfig(stub.base_url, MODEL, "k", 5.0, 0)

    def summarize(chat_messages: list[dict[str, Any]], max_tokens: int) -> tuple[str, int]:
        reply = chat(config, chat_messages, max_tokens=max_tokens)
        return reply.content or "", reply.total_tokens

    return summarize


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    evs=transcripts(),
    fmt=st.sampled_from(["openai", "anthropic"]),
    strategy=st.sampled_from(["auto", "compact", "summarize"]),
    llm=st.sampled_from([None, *STUB_REPLIES]),
    keep=st.one_of(st.none(), st.integers(0, 3000)),
    force=st.booleans(),
)
def test_compact_output_is_valid_for_the_chat_apis(
    stub: FakeLLM, evs: Any, fmt: str, strategy: Any, llm: str | None, keep: int | None, force: bool
) -> None:
    messages, system = _case(evs, fmt)
    transcript = parse(messages, system)
    summarizer = None
    if llm is not None:
        stub.set_default(STUB_REPLIES[llm])
        summarizer = _summarizer(stub)
    options = CompactOptions(strategy, 8000, keep, force=force, fmt=transcript.format)
    out, report, summary = compact(transcript.messages, COUNTER, options, summarizer)
    rendered, system_out = render(transcript, out)
    assert chat_api_problems(rendered, system_out, fmt) == [], rendered
    everything = json.dumps([rendered, system_out], ensure_ascii=False)
    assert everything.count("Open todos (carried over") <= 1
    if summary is not None:  # the user's first request is never summarised away
        first = next((m for m in transcript.messages if m.role == "user" and m.content), None)
        if first is not None and isinstance(first.content, str) and "```" not in first.content:
            assert first.content in everything
    if report.action == "compacted":  # a compaction always makes the messages shorter
        assert report.tokens_after < report.tokens_before
    else:
        assert report.action == "skipped" and summary is None


FILLER = ["alpha", "beta", "parser.py", "fix", "你好", "世界", "Stick to Node 20.", "log line 42 failed"]
SIZES = st.sampled_from([0, 3, 60, 600, 2500, 9000])  # words


def _filler(seed: int, words: int) -> str:
    return " ".join(FILLER[(seed + 7 * k) % len(FILLER)] for k in range(words))


@st.composite
def oversized(draw: Any) -> list[dict[str, Any]]:
    """Short transcripts (1-24 turns) with messages of very different sizes, maybe a big system prompt."""
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        out.append({"role": "system", "content": _filler(draw(st.integers(0, 9)), draw(SIZES))})
    for k in range(draw(st.integers(1, 24))):
        role = draw(st.sampled_from(["user", "assistant", "chain"]))
        text = _filler(draw(st.integers(0, 9)), draw(SIZES))
        if role != "chain":
            out.append({"role": role, "content": text})
            continue
        fn = {"name": "run", "arguments": "{}"}
        out.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{k}", "type": "function", "function": fn}]})
        out.append({"role": "tool", "tool_call_id": f"c{k}", "content": text})
    return out


_PART = re.compile(r"(system messages|summary|newest user message|other kept messages) (\d+)")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=oversized(), window=st.integers(1000, 8000), keep=st.one_of(st.none(), st.integers(0, 12_000)))
def test_auto_compaction_of_a_conversation_over_its_window(messages: Any, window: int, keep: int | None) -> None:
    """Over its window, auto compaction is never skipped by the message-count or new-tokens triggers: the
    result fits (with the code's summary: no LLM), or the report says it does not and what it is made of."""
    out, report, summary = compact(parse(messages).messages, COUNTER, CompactOptions("auto", window, keep), None)
    assume(report.tokens_before > window)
    event(f"{report.action}, {'fits' if report.fits_window else 'still over'}")
    assert "the first summary is made at" not in report.reason and "since the last summary" not in report.reason
    if report.action == "skipped":  # only when compacting cannot help
        assert report.reason.startswith(("Nothing old to summarise", "Not compacted")) and summary is None
    else:
        assert report.source == "fallback" and report.fallback_reason and summary is not None
    assert report.fits_window == (report.tokens_after <= window)
    if not report.fits_window:
        head = f"Still over context_window: {report.tokens_after} tokens for a window of {window} ("
        assert head in report.reason, report.reason
        assert sum(int(n) for _, n in _PART.findall(report.reason)) == report.tokens_after, report.reason
