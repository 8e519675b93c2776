"""compact_context: the real `openai` client against the local fake endpoint, fallbacks, fidelity,
incremental triggers and stored summaries."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from bench.context_bench import CONSTRAINTS, make_events, open_todos_of, to_anthropic, to_openai
from context.compact import CompactOptions, compact
from context.messages import parse, render
from context.tokens import counter_for
from tests.context_checks import api_problems, user_texts
from tests.fake_llm import FakeLLM, fake_llm  # noqa: F401
from tools.context_compact import compact_context
from tools.runtime import CallContext, Runtime

pytestmark = pytest.mark.storage

COUNTER = counter_for(None)
SUMMARY = "## Primary request and intent\nRefactor the parser.\n## Next step\nRun pytest."


def _call(rt: Runtime, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    return compact_context(messages, rt=rt, call=CallContext(tool="compact_context"), **kwargs)


@pytest.fixture
def llm_rt(make_settings: Any, fake_llm: FakeLLM) -> Any:  # noqa: F811
    rt = Runtime(make_settings(**fake_llm.settings_overrides(timeout_seconds=1.0)))
    yield rt
    rt.close()


def test_llm_summary_through_real_client(llm_rt: Runtime, fake_llm: FakeLLM) -> None:  # noqa: F811
    fake_llm.reply_text(SUMMARY, prompt_tokens=900, completion_tokens=40)
    messages = to_openai(make_events(300, seed=1))
    result = _call(llm_rt, messages, strategy="compact", context_window=32_000)
    report = result.report
    assert (report.action, report.source, report.strategy) == ("compacted", "llm", "compact")
    assert report.llm_tokens == 940 and report.tokens_after < report.tokens_before * 0.2
    summary = result.messages[1]
    assert summary["role"] == "system" and summary["content"].startswith("# Conversation summary")
    assert (
        "Refactor the parser." in summary["content"] and "## Open todos (carried over)" in summary["content"]
    )
    assert api_problems(result.messages, "openai") == []
    request = fake_llm.requests[0]
    assert request["model"] == "fake-model" and request["max_tokens"] == 3000
    assert "## Files and code sections" in request["messages"][0]["content"]
    assert "Conversation to summarise" in request["messages"][1]["content"]


@pytest.mark.parametrize("failure", ["error", "timeout", "garbage"])
def test_endpoint_failures_fall_back(llm_rt: Runtime, fake_llm: FakeLLM, failure: str) -> None:  # noqa: F811
    if failure == "error":
        fake_llm.set_default(fake_llm.default)  # every attempt (incl. the client's retry) fails
        fake_llm.reply_error(503, "overloaded")
    elif failure == "timeout":
        fake_llm.reply_text("too late", delay=5)
        fake_llm.reply_text("too late", delay=5)
    else:
        fake_llm.reply_raw("<html>not json</html>")
    messages = to_openai(make_events(200, seed=2))
    result = _call(llm_rt, messages, strategy="summarize", context_window=32_000)
    report = result.report
    assert report.action == "compacted" and report.source == "fallback"
    assert report.fallback_reason and "LLM endpoint" in report.fallback_reason
    if failure == "timeout":
        assert "did not answer within" in report.fallback_reason
    assert "Made without an LLM" in result.messages[1]["content"]
    assert api_problems(result.messages, "openai") == []


def test_no_endpoint_falls_back(settings: Any) -> None:
    rt = Runtime(settings)
    result = _call(rt, to_openai(make_events(200, seed=3)), context_window=32_000)
    assert result.report.source == "fallback" and "GENERALAGENT_LLM_BASE_URL" in (
        result.report.fallback_reason or ""
    )
    rt.close()


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_fidelity_at_2000_messages(fmt: str) -> None:
    events = make_events(2000, seed=11)
    messages = to_openai(events) if fmt == "openai" else to_anthropic(events)
    transcript = parse(messages, "You are a coding agent." if fmt == "anthropic" else None)
    out, report, summary = compact(transcript.messages, COUNTER, CompactOptions(context_window=128_000), None)
    rendered, system_out = render(transcript, out)
    everything = json.dumps([rendered, system_out], ensure_ascii=False)
    assert summary is not None
    todos = open_todos_of(events)
    assert todos and all(t in summary for t in todos)  # 100% of open todos
    assert all(c in everything for c in CONSTRAINTS)  # 100% of constraint sentences
    assert api_problems(rendered, fmt) == []  # 0 orphans
    assert report.tokens_after <= 0.2 * report.tokens_before  # >= 80% fewer tokens
    assert user_texts(rendered)[-1] == user_texts(messages)[-1]


def test_todo_store_beats_transcript(llm_rt: Runtime, fake_llm: FakeLLM) -> None:  # noqa: F811
    from tools.todos import resolve_list_id, todo_store

    list_id = resolve_list_id(llm_rt, None, "default")
    todo_store(llm_rt).write(list_id, [{"content": "Ship the release notes", "status": "pending"}])
    fake_llm.reply_text(SUMMARY)
    result = _call(llm_rt, to_openai(make_events(200, seed=4)), context_window=32_000)
    text = result.messages[1]["content"]
    assert "Ship the release notes" in text and "Task 0 of round" not in text
    assert result.report.todo_source.startswith("todo list")


def test_auto_triggers_and_incremental_summary(llm_rt: Runtime, fake_llm: FakeLLM) -> None:  # noqa: F811
    small = to_openai(make_events(15, seed=5, constraints=[]))
    skipped = _call(llm_rt, small, context_window=32_000)
    assert skipped.report.action == "skipped" and "20" in skipped.report.reason
    assert skipped.messages == small and not fake_llm.requests

    fake_llm.reply_text(SUMMARY)
    messages = to_openai(make_events(120, seed=5))
    first = _call(llm_rt, messages, context_window=32_000, conversation_id="conv-1")
    assert first.report.action == "compacted" and first.report.stored and not first.report.incremental

    # The client adopts the result and adds a few messages: too little new -> skipped.
    adopted = [*first.messages, {"role": "user", "content": "ok"}, {"role": "assistant", "content": "done"}]
    again = _call(llm_rt, adopted, context_window=32_000, keep_recent_tokens=10)
    assert again.report.action == "skipped" and "since the last summary" in again.report.reason

    # Many new messages -> incremental: the previous summary goes to the LLM with the new ones.
    fake_llm.reply_text("## Primary request and intent\nMerged summary.")
    grown = adopted + to_openai(make_events(150, seed=6))[1:]
    merged = _call(llm_rt, grown, context_window=32_000)
    assert merged.report.action == "compacted" and merged.report.incremental
    assert "Previous summary:" in fake_llm.requests[-1]["messages"][1]["content"]
    assert "Merged summary." in merged.messages[1]["content"]
    assert merged.messages[1]["content"].count("# Conversation summary") == 1


def test_stored_summary_used_when_client_resends_full_history(llm_rt: Runtime, fake_llm: FakeLLM) -> None:  # noqa: F811
    fake_llm.reply_text(SUMMARY)
    messages = to_openai(make_events(120, seed=8))
    first = _call(llm_rt, messages, context_window=32_000, conversation_id="conv-2")
    assert first.report.stored
    fake_llm.reply_text("## Primary request and intent\nIncremental from the store.")
    longer = messages + to_openai(make_events(150, seed=9))[1:]
    second = _call(llm_rt, longer, context_window=32_000, conversation_id="conv-2")
    assert second.report.incremental and "Incremental from the store." in second.messages[1]["content"]
    assert "Refactor the parser." in fake_llm.requests[-1]["messages"][1]["content"]  # previous summary sent


def test_anthropic_summary_goes_to_system(llm_rt: Runtime, fake_llm: FakeLLM) -> None:  # noqa: F811
    fake_llm.reply_text(SUMMARY)
    messages = to_anthropic(make_events(200, seed=10))
    result = _call(llm_rt, messages, system="You are a coding agent.", context_window=32_000)
    assert result.format == "anthropic" and result.system.startswith("You are a coding agent.")
    assert "# Conversation summary" in result.system
    assert all(m["role"] in ("user", "assistant") for m in result.messages)
    assert api_problems(result.messages, "anthropic") == []


def test_large_input_total_is_a_labelled_estimate() -> None:
    from context.tokens import message_tokens

    transcript = parse(to_openai(make_events(2000, seed=12)))
    out, report, summary = compact(
        transcript.messages, COUNTER, CompactOptions("compact", 128_000, force=True), None
    )
    assert summary and "## Files mentioned\n" in summary and "src/app/parser.py" in summary
    exact = sum(message_tokens(COUNTER, m) for m in transcript.messages)
    assert report.tokens_before_estimated and abs(report.tokens_before - exact) < 0.1 * exact
    assert report.tokens_after == sum(message_tokens(COUNTER, m) for m in out)
    small = parse(to_openai(make_events(30, seed=12)))
    _, report, _ = compact(small.messages, COUNTER, CompactOptions("compact", 128_000, force=True), None)
    assert not report.tokens_before_estimated
    assert report.tokens_before == sum(message_tokens(COUNTER, m) for m in small.messages)


@pytest.mark.parametrize("n", [12, 20])
def test_a_compaction_that_would_grow_the_messages_is_skipped(n: int) -> None:
    """A forced compaction of a few short messages: the summary would be longer than what it replaces."""
    replies = ["hi", "ok", "yes", "go on"]
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": replies[i % 4]} for i in range(n)]
    transcript = parse(messages)
    out, report, summary = compact(transcript.messages, COUNTER, CompactOptions("compact", 8000, 0, force=True), None)
    assert report.action == "skipped" and "not fewer than" in report.reason and summary is None
    assert report.tokens_after == report.tokens_before and render(transcript, out)[0] == messages


def test_the_first_request_is_the_first_user_message_that_says_something() -> None:
    """Empty or blank user messages before it ask for nothing: the first request kept verbatim after a
    summary is the first one with text (found by the API-validity property test)."""
    from context.compact import first_request

    transcript = parse([{"role": "user", "content": ""}, {"role": "assistant", "content": "?"},
                        {"role": "user", "content": "  \n"}, {"role": "user", "content": "Stick to Node 20. alpha"},
                        {"role": "user", "content": "and beta"}], None)
    found = first_request(transcript.messages)
    assert found is not None and found.content == "Stick to Node 20. alpha"
    audio = [{"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}]
    spoken = parse([{"role": "user", "content": audio}, {"role": "user", "content": "and beta"}], None)
    found = first_request(spoken.messages)
    assert found is not None and found.content == audio  # a request without text still asks something


def test_a_result_still_over_the_window_says_what_is_too_big() -> None:
    """A system prompt bigger than the window: compaction cannot make it fit, and the report says so,
    with the parts' sizes (they add up to tokens_after) and what to change."""
    messages = [{"role": "system", "content": "Follow the house rules. " + "rule " * 9000}]
    messages += [{"role": "user" if i % 2 == 0 else "assistant", "content": f"step {i} " + "word " * 2000}
                 for i in range(12)]
    transcript = parse(messages)
    out, report, summary = compact(transcript.messages, COUNTER, CompactOptions(context_window=8000), None)
    assert report.action == "compacted" and summary is not None and not report.fits_window
    assert report.reason.startswith(f"Still over context_window: {report.tokens_after} tokens for a window of 8000")
    assert "The system messages take the most: shorten them." in report.reason
    sizes = re.findall(r"(system messages|summary|newest user message|other kept messages) (\d+)", report.reason)
    assert sum(int(n) for _, n in sizes) == report.tokens_after


def test_a_newest_message_over_the_window_is_cut_to_the_room_left() -> None:
    """The newest user message alone exceeds the window and a long reply follows it: the message is cut
    in the middle to the room the summary, the first request and the reply leave, and the result fits."""
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"step {i} " + "word " * 300}
                for i in range(6)]
    messages.append({"role": "user", "content": "Please read this. " + "log line failed " * 2000})
    messages.append({"role": "assistant", "content": "It failed because " + "the cache was cold " * 485})
    out, report, _ = compact(parse(messages).messages, COUNTER, CompactOptions(context_window=4000), None)
    assert (report.action, report.reason, report.fits_window) == ("compacted", "", True)
    assert report.tokens_after <= 4000 and [m.role for m in out[-2:]] == ["user", "assistant"]
    newest = str(out[-2].content)
    assert newest.startswith("Please read this.") and "the newest user message was over the budget" in newest
