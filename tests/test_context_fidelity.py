"""The user's words and open todos survive optimize and compact (issue 12): generated transcripts
with constraint sentences of many shapes (English and Chinese, most without trigger words)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench._context_cases import make_case
from context.carryover import Todo
from context.compact import COMPACT_PROMPT, SUMMARIZE_PROMPT, CompactOptions, compact
from context.messages import parse, render
from context.optimize import Budget, optimize
from context.tokens import counter_for
from context.userwords import blobs, instruction_score, prose_sentences, tier
from tests.context_checks import all_text, chat_api_problems
from tests.fake_llm import FakeLLM, fake_llm  # noqa: F401
from tools.context_compact import compact_context
from tools.context_optimize import optimize_context
from tools.runtime import CallContext, Runtime

COUNTER = counter_for("gpt-4o")
OMITS_EVERYTHING = "## Summary\nThe work went on."


def _omit(chat_messages: list[dict[str, Any]], max_tokens: int) -> tuple[str, int]:
    return OMITS_EVERYTHING, 10


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.parametrize("llm", [None, _omit])
def test_compact_keeps_every_constraint_and_todo(fmt: str, llm: Any) -> None:
    case = make_case(2000, fmt, seed=21)
    transcript = parse(case.messages, case.system)
    options = CompactOptions("compact", 32_000, force=True, fmt=fmt)
    out, report, summary = compact(transcript.messages, COUNTER, options, llm)
    rendered, system_out = render(transcript, out)
    text = all_text(rendered, system_out)
    assert [c for c in case.constraints if c not in text] == []
    assert [t for t in case.open_todos if t not in (summary or "")] == []
    assert chat_api_problems(rendered, system_out, fmt) == []
    assert report.tokens_after <= 0.2 * report.tokens_before
    assert "Please refactor the parser" in text  # the first request is never summarised away
    assert report.words.dropped == 0 and report.words.sentences > 100


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_optimize_keeps_the_users_words_when_they_fit(fmt: str) -> None:
    case = make_case(2000, fmt, seed=22)
    transcript = parse(case.messages, case.system)
    out, report = optimize(transcript.messages, COUNTER, Budget(8000), todos=None, fmt=fmt)
    rendered, system_out = render(transcript, out)
    text = all_text(rendered, system_out)
    assert [c for c in case.constraints if c not in text] == []
    assert [t for t in case.open_todos if t not in text] == []
    assert chat_api_problems(rendered, system_out, fmt) == []
    assert report.tokens_after <= 0.6 * 8000 and report.tokens_after < 0.05 * report.tokens_before
    assert report.words.dropped == 0 and report.words.blobs_compressed > 0  # pasted logs compressed
    assert report.todos_carried == len(case.open_todos)
    assert text.count("Open todos (carried over") == 1


def test_under_real_pressure_small_talk_goes_first_and_is_reported() -> None:
    case = make_case(2000, "openai", seed=23)
    transcript = parse(case.messages)
    out, report = optimize(transcript.messages, COUNTER, Budget(2000), fmt="openai")
    text = all_text(*render(transcript, out))
    words = report.words
    assert words.dropped > 0 and 0 < len(words.dropped_sentences) <= 20
    kept_share = sum(c in text for c in case.constraints) / len(case.constraints)
    small_talk = ["Thanks!", "Looks good so far.", "OK, go on.", "好的，谢谢。"]
    dropped_small = sum(s in words.dropped_sentences for s in small_talk)
    assert dropped_small >= 1 and kept_share == 1.0  # pasted blobs and small talk went first
    assert report.tokens_after <= 0.6 * 2000 + 50
    assert "Please refactor the parser" in text  # the first request stays


def test_one_reminder_and_it_stays_in_place_when_unchanged() -> None:
    case = make_case(300, "openai", seed=24)
    transcript = parse(case.messages)
    out, _ = optimize(transcript.messages, COUNTER, Budget(16_000), fmt="openai")
    rendered, _ = render(transcript, out)
    # The client sends it back with a new turn: the identical reminder is not moved or repeated.
    grown = [*rendered, {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Next?"}]
    again_t = parse(grown)
    again, _ = optimize(again_t.messages, COUNTER, Budget(128_000), fmt="openai")
    again_r, _ = render(again_t, again)
    marked = [k for k, m in enumerate(again_r) if "Open todos (carried over" in json.dumps(m)]
    assert len(marked) == 1 and again_r[marked[0]] == rendered[marked[0]]
    # A changed list replaces it: still one, at the end.
    done, _ = optimize(again_t.messages, COUNTER, Budget(128_000), todos=[], fmt="openai")
    assert not any("Open todos (carried over" in json.dumps(m) for m in render(again_t, done)[0])
    other = [Todo("Write the changelog", "pending")]
    changed, _ = optimize(again_t.messages, COUNTER, Budget(128_000), todos=other, fmt="openai")
    changed_r = render(again_t, changed)[0]
    marked = [k for k, m in enumerate(changed_r) if "Open todos (carried over" in json.dumps(m)]
    assert marked == [len(changed_r) - 1] and "Write the changelog" in json.dumps(changed_r[-1])


def test_optimize_tool_reads_the_workspace_todo_list(settings: Any) -> None:
    from tools.todos import resolve_list_id, todo_store

    rt = Runtime(settings)
    todo_store(rt).write(resolve_list_id(rt, None, "default"), [{"content": "Ship the release notes", "status": "pending"}])
    case = make_case(400, "anthropic", seed=25)
    call = CallContext(tool="optimize_context")
    result = optimize_context(case.messages, 16_000, system=case.system, rt=rt, call=call)
    pages = [result]
    while pages[-1].next_offset is not None:
        pages.append(optimize_context(case.messages, 16_000, system=case.system, page_offset=pages[-1].next_offset, rt=rt, call=call))
    text = all_text([m for p in pages for m in p.messages], result.system)
    assert "Ship the release notes" in text and text.count("Open todos (carried over") == 1
    assert result.report.todo_source.startswith("todo list") and result.report.todos_carried == 1
    assert result.report.user_words["kept"] == result.report.user_words["sentences"] > 0
    assert result.report.encoding == "o200k_base" or not result.report.tokenizer_exact
    rt.close()


def test_llm_is_asked_for_the_constraints_section(make_settings: Any, fake_llm: FakeLLM) -> None:  # noqa: F811
    rt = Runtime(make_settings(**fake_llm.settings_overrides()))
    fake_llm.reply_text(OMITS_EVERYTHING)
    case = make_case(300, "openai", seed=26)
    result = compact_context(case.messages, strategy="compact", context_window=32_000, rt=rt, call=CallContext(tool="compact_context"))
    assert "## User constraints and preferences" in fake_llm.requests[0]["messages"][0]["content"]
    assert "User constraints and preferences" in SUMMARIZE_PROMPT and "verbatim" in COMPACT_PROMPT
    text = all_text(result.messages, result.system)
    assert all(c in text for c in case.constraints)
    assert result.report.source == "llm" and result.report.constraints_carried >= len(case.constraints)
    assert result.report.user_words["dropped"] == 0
    rt.close()


@pytest.mark.parametrize(
    "sentence",
    ["Reply in Spanish from here on.", "Stick to Node 20.", "Our quota is 10 uploads an hour, so queue them.", "请用繁体中文回答。", "Ana reviews every migration before it ships.", "数据库用 MySQL 8.0。"],
)
def test_instructions_rank_above_small_talk(sentence: str) -> None:
    for chatter in ["Thanks!", "Looks good so far.", "好的，谢谢。", "Hmm, interesting."]:
        assert instruction_score(sentence) > instruction_score(chatter)
    assert tier(sentence) >= 1


def test_pasted_blobs_are_not_prose() -> None:
    text = "Here is the log:\n```\n" + "line\n" * 50 + "```\nWhy does it fail? Stick to Node 20."
    assert len(blobs(text)) == 1
    assert prose_sentences(text) == ["Here is the log:", "Why does it fail?", "Stick to Node 20."]
    unfenced = "Output:\n\n" + "\n".join(f"12:00:{k:02d} worker failed with code {k}" for k in range(30)) + "\n\nPlease check."
    assert prose_sentences(unfenced) == ["Output:", "Please check."]


_CLAUSE = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp"),
                                exclude_characters=".!?。！？;；`<>"), min_size=1, max_size=30).map(str.strip).filter(bool)


@settings(max_examples=200, deadline=None)
@given(clauses=st.lists(_CLAUSE, min_size=2, max_size=4), joiner=st.sampled_from(["; ", ";", "；", "； "]),
       end=st.sampled_from([".", "。", "!", "？"]))
def test_a_sentence_stays_whole_across_semicolons(clauses: list[str], joiner: str, end: str) -> None:
    sentence = joiner.join(clauses) + end
    assert prose_sentences(f"{sentence} Next one.") == [sentence, "Next one."]


@pytest.mark.parametrize("sentence", ["Use tabs in Makefiles; never spaces, not even once.",
                                      "数据库用 MySQL 8.0；缓存用 Redis 7，不要换。"])
def test_compact_carries_a_semicolon_sentence_as_one_bullet(sentence: str) -> None:
    messages = [{"role": "user", "content": "Please refactor the parser."},
                {"role": "assistant", "content": "Starting."}, {"role": "user", "content": f"Noted. {sentence}"}]
    for k in range(40):
        messages += [{"role": "assistant", "content": f"Step {k}: edited parser.py line {k}. " * 20},
                     {"role": "user", "content": f"Go on with step {k + 1}."}]
    transcript = parse(messages, None)
    out, _, summary = compact(transcript.messages, COUNTER, CompactOptions("compact", 8000, force=True), _omit)
    text = all_text(*render(transcript, out))
    assert f"- {sentence}\n" in text + "\n"
    assert not any(line.startswith("- ") and line[2:] and line[2:] in sentence and line[2:] != sentence
                   for line in text.splitlines())
