"""optimize_context: examples plus the API-validity property on random transcripts (both formats)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from context.compact import CompactOptions, compact
from context.messages import parse, render
from context.optimize import Budget, optimize
from context.tokens import counter_for
from foundation.errors import InvalidInput
from tests.context_checks import api_problems, is_subsequence, user_texts
from tests.json_strategies import json_values

COUNTER = counter_for(None)


def run(
    messages: list[dict[str, Any]], system: Any = None, **budget: Any
) -> tuple[list[dict[str, Any]], Any, Any]:
    transcript = parse(messages, system)
    out, report = optimize(transcript.messages, COUNTER, Budget(**{"context_window": 4000, **budget}))
    rendered, system_out = render(transcript, out)
    return rendered, system_out, report


# ---------------------------------------------------------------- random transcripts

WORDS = st.sampled_from(
    ["alpha", "beta", "gamma", "delta", "file", "test", "error", "fix", "你好", "世界", "pytest", "build"]
)
TEXT = st.lists(WORDS, min_size=1, max_size=30).map(" ".join)
BIG = st.integers(1, 400).map(lambda n: json.dumps({"status": "ok", "items": list(range(n))}))
RESULT = st.one_of(TEXT, BIG, st.integers(1, 600).map(lambda n: "line of output\n" * n))


@st.composite
def events(draw: Any) -> list[tuple[Any, ...]]:
    """Abstract turns: user/assistant text, and tool chains with some results missing or late."""
    out: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["user", "assistant", "chain", "chain", "chain"]))
        if kind != "chain":
            out.append((kind, draw(TEXT)))
            continue
        n = draw(st.integers(1, 3))
        answered = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        results = [draw(RESULT) for _ in range(n)]
        interrupt = draw(st.sampled_from([None, None, None, "user"]))
        out.append(("chain", draw(st.one_of(st.none(), TEXT)), answered, results, interrupt))
    return out


def to_openai(evs: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    for k, ev in enumerate(evs):
        if ev[0] != "chain":
            msgs.append({"role": ev[0], "content": ev[1]})
            continue
        _, text, answered, results, interrupt = ev
        ids = [f"call_{k}_{i}" for i in range(len(answered))]
        calls = [{"id": c, "type": "function", "function": {"name": "run", "arguments": "{}"}} for c in ids]
        msgs.append({"role": "assistant", "content": text, "tool_calls": calls})
        if interrupt:
            msgs.append({"role": "user", "content": "wait, one more thing"})
        for call_id, ok, result in zip(ids, answered, results, strict=True):
            if ok:
                msgs.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return msgs


def to_anthropic(evs: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    for k, ev in enumerate(evs):
        if ev[0] != "chain":
            msgs.append({"role": ev[0], "content": [{"type": "text", "text": ev[1]}]})
            continue
        _, text, answered, results, interrupt = ev
        ids = [f"toolu_{k}_{i}" for i in range(len(answered))]
        blocks = ([{"type": "text", "text": text}] if text else []) + [
            {"type": "tool_use", "id": c, "name": "run", "input": {}} for c in ids
        ]
        msgs.append({"role": "assistant", "content": blocks})
        if interrupt:
            msgs.append({"role": "user", "content": "wait, one more thing"})
        res = [
            {"type": "tool_result", "tool_use_id": c, "content": r}
            for c, ok, r in zip(ids, answered, results, strict=True)
            if ok
        ]
        if res:
            msgs.append({"role": "user", "content": res + [{"type": "text", "text": "continue"}]})
    return msgs


def _unchanged_or_marked(out: list[str], original: list[str]) -> bool:
    plain = [t for t in out if "[compressed:" not in t]
    return is_subsequence(plain, original)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    evs=events(),
    fmt=st.sampled_from(["openai", "anthropic"]),
    window=st.integers(100, 20_000),
    tool_max=st.integers(20, 400),
    min_messages=st.integers(0, 12),
)
def test_output_is_always_api_valid(
    evs: Any, fmt: str, window: int, tool_max: int, min_messages: int
) -> None:
    messages = to_openai(evs) if fmt == "openai" else to_anthropic(evs)
    system = "You are helpful." if fmt == "anthropic" else None
    out, system_out, report = run(
        messages, system, context_window=window, tool_output_max_tokens=tool_max, min_messages=min_messages
    )
    assert api_problems(out, fmt) == []
    assert _unchanged_or_marked(user_texts(out), user_texts(messages))
    # order preserved: unchanged messages are a subsequence of the input
    assert is_subsequence([m for m in out if m in messages], messages)
    assert report.tokens_after <= report.tokens_before
    if fmt == "openai":
        assert out[0] == messages[0]  # system kept
    else:
        assert system_out == "You are helpful."
    last_user = [t for t in user_texts(messages)[-1:]]
    if last_user and "[compressed:" not in "".join(user_texts(out)):
        assert user_texts(out)[-1:] == last_user or not user_texts(out)


# The only user message is both the first request (kept after the summary) and the newest one
# (kept by keep_last_user): it was once sent twice when it fell into the old part (keep=0).
ONE_USER_MESSAGE = [
    ("user", "alpha"),
    ("assistant", "alpha"),
    ("assistant", "alpha"),
    ("chain", None, [True, True, True], ['{"status": "ok", "items": [0]}', "alpha", "alpha"], None),
    ("chain", None, [True], ["alpha"], None),
    ("assistant", "alpha"),
    ("assistant", "alpha"),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(evs=events(), fmt=st.sampled_from(["openai", "anthropic"]), keep=st.integers(0, 3000))
@example(evs=ONE_USER_MESSAGE, fmt="openai", keep=0)
@example(evs=ONE_USER_MESSAGE, fmt="anthropic", keep=0)
def test_compact_fallback_output_is_api_valid(evs: Any, fmt: str, keep: int) -> None:
    messages = to_openai(evs) if fmt == "openai" else to_anthropic(evs)
    transcript = parse(messages, "You are helpful." if fmt == "anthropic" else None)
    options = CompactOptions("compact", 8000, keep_recent_tokens=keep, force=True)
    out, report, _ = compact(transcript.messages, COUNTER, options, None)
    rendered, _system = render(transcript, out)
    assert api_problems(rendered, fmt) == []
    assert _unchanged_or_marked(user_texts(rendered), user_texts(messages))
    if report.action == "compacted":
        assert report.source == "fallback"


# ---------------------------------------------------------------- examples


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_compact_keeps_a_first_request_that_is_also_the_newest_once(fmt: str) -> None:
    # the user message falls into the old part; long answers, so that a summary is shorter than they are
    evs = [("user", "alpha")] + [("assistant", " ".join(["beta gamma delta"] * 60))] * 11
    messages = to_openai(evs) if fmt == "openai" else to_anthropic(evs)
    transcript = parse(messages, "You are helpful." if fmt == "anthropic" else None)
    options = CompactOptions("compact", 8000, keep_recent_tokens=0, force=True, fmt=fmt)
    out, report, _ = compact(transcript.messages, COUNTER, options, None)
    rendered, _system = render(transcript, out)
    assert report.action == "compacted" and report.old_messages >= 1
    assert user_texts(rendered) == user_texts(messages)
    assert api_problems(rendered, fmt) == []


def _chain(i: int, result: str) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": result},
    ]


def test_unanswered_call_and_orphaned_results_dropped() -> None:
    call = {"id": "a", "type": "function", "function": {"name": "x", "arguments": "{}"}}
    call2 = {"id": "b", "type": "function", "function": {"name": "x", "arguments": "{}"}}
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call, call2]},
        {"role": "tool", "tool_call_id": "a", "content": "only a answered"},
        {"role": "user", "content": "next"},
    ]
    out, _, report = run(msgs)
    assert out == [msgs[0], msgs[3]] and report.orphans_removed == 2


def test_json_tool_output_compressed_keeps_flags_and_ends() -> None:
    body = json.dumps({"success": True, "count": 500, "items": [{"n": i} for i in range(500)]})
    msgs = [{"role": "user", "content": "list"}, *_chain(1, body)]
    out, _, report = run(msgs, tool_output_max_tokens=100)
    small = json.loads(out[2]["content"])
    assert small["success"] is True and small["count"] == 500 and small["compressed"] is True
    assert small["items"][0] == {"n": 0} and small["items"][-1] == {"n": 499}
    assert small["omitted_items"] == 498 and report.compressed == 1


def test_plain_tool_output_cut_in_the_middle() -> None:
    body = "START " + "filler words here " * 2000 + " END"
    out, _, _ = run([{"role": "user", "content": "x"}, *_chain(1, body)], tool_output_max_tokens=100)
    text = out[2]["content"]
    assert text.startswith("START") and text.endswith("END") and "[compressed: about" in text
    assert COUNTER.count(text) < 160


def test_selection_keeps_recent_and_first_request_under_target() -> None:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "The task."},
    ]
    for i in range(200):
        msgs += [*_chain(i, f"result {i} " * 30), {"role": "assistant", "content": f"step {i} done"}]
    msgs.append({"role": "user", "content": "And now?"})
    out, _, report = run(msgs, context_window=4000)
    assert out[0] == msgs[0] and out[1] == msgs[1] and out[-1] == msgs[-1]
    assert report.tokens_after <= 0.6 * 4000 and report.tokens_before > 8 * report.tokens_after
    assert api_problems(out, "openai") == []


def test_oversized_last_user_message_is_cut_with_marker() -> None:
    msgs = [{"role": "user", "content": f"question {i}"} for i in range(20)]
    msgs.append({"role": "user", "content": "HEAD " + "pasted log line " * 5000 + " TAIL"})
    out, _, _ = run(msgs, context_window=2000)
    assert out[-1]["content"].startswith("HEAD") and "[compressed:" in out[-1]["content"]


def test_anthropic_round_trip_unchanged_when_small() -> None:
    msgs = to_anthropic([("user", "hi"), ("chain", "let me look", [True, True], ["r1", "r2"], None)])
    out, system_out, report = run(
        msgs, system=[{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}]
    )
    assert out == msgs and system_out == [
        {"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}
    ]
    assert report.removed == 0


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([{"role": "wizard", "content": "x"}], "messages[0]: unknown role 'wizard'"),
        ([{"role": "user", "content": 5}], "messages[0]: content is a int"),
        (
            [{"role": "user", "content": "a"}, {"role": "tool", "tool_call_id": "zz", "content": "r"}],
            "messages[1]",
        ),
        (
            [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "q", "content": "r"}]}],
            "never made",
        ),
        (["hello"], "messages[0]: is a str"),
        (
            [
                {"role": "tool", "tool_call_id": "a", "content": "x"},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
            ],
            "mix formats",
        ),
    ],
)
def test_malformed_input_names_the_index(messages: list[Any], fragment: str) -> None:
    with pytest.raises(InvalidInput, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        parse(messages)


JSON = json_values(max_leaves=20)
ROLE = st.sampled_from(["user", "assistant", "tool", "system", "developer", "bot", None])
PART = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "tool_use", "tool_result", "image", "image_url", 3])},
    optional={
        "text": JSON,
        "id": st.sampled_from(["a", "b", 1]),
        "tool_use_id": st.sampled_from(["a", "b"]),
        "name": JSON,
        "input": JSON,
        "content": JSON,
    },
)
MESSAGE = st.fixed_dictionaries(
    {"role": ROLE},
    optional={
        "content": st.one_of(JSON, st.lists(PART, max_size=3)),
        "tool_calls": st.one_of(
            JSON,
            st.lists(
                st.fixed_dictionaries(
                    {
                        "id": st.sampled_from(["a", "b"]),
                        "function": st.fixed_dictionaries({"name": st.just("f")}),
                    }
                ),
                max_size=2,
            ),
        ),
        "tool_call_id": st.sampled_from(["a", "b", 5]),
    },
)


@settings(max_examples=300, deadline=None)
@given(messages=st.lists(st.one_of(MESSAGE, JSON), max_size=8), system=st.one_of(st.none(), JSON))
def test_garbage_input_gets_invalid_input_never_a_crash(messages: Any, system: Any) -> None:
    try:
        transcript = parse(messages, system)
    except InvalidInput as exc:
        assert str(exc)
        return
    out, _ = optimize(transcript.messages, COUNTER, Budget(context_window=1000, min_messages=0))
    rendered, _system = render(transcript, out)
    assert api_problems(rendered, transcript.format) == []


# ---------------------------------------------------------------- cold path: count only what is kept


class _Recording:
    """The real encoding, recording how many characters it was asked to tokenise."""

    def __init__(self, encoding: Any) -> None:
        self.encoding, self.name, self.chars = encoding, encoding.name, 0

    def encode_ordinary(self, text: str) -> list[int]:
        self.chars += len(text)
        return list(self.encoding.encode_ordinary(text))


def test_large_transcript_is_not_tokenised_in_full() -> None:
    from bench.context_bench import make_transcript
    from context.messages import content_text, message_text
    from context.optimize import _memo
    from context.tokens import Counter, _counts, message_tokens

    messages = make_transcript(2000, seed=3)
    transcript = parse(messages)
    _counts.clear()
    _memo.clear()
    recording = _Recording(COUNTER.encoding)
    counter = Counter(recording, COUNTER.name, COUNTER.estimate, None)
    out, report = optimize(transcript.messages, counter, Budget(context_window=32_000))
    everything = sum(len(message_text(m)) for m in transcript.messages)
    assert recording.chars < 0.2 * everything  # cold: only kept and sampled text was tokenised
    exact_before = sum(message_tokens(COUNTER, m) for m in transcript.messages)
    assert report.tokens_before_estimated and abs(report.tokens_before - exact_before) < 0.1 * exact_before
    # the budgets hold by real counts
    assert report.tokens_after == sum(message_tokens(COUNTER, m) for m in out) <= 0.6 * 32_000
    assert all(COUNTER.count(content_text(m.content)) <= 200 for m in out if m.role == "tool")
    rendered, _ = render(transcript, out)
    assert api_problems(rendered, "openai") == []


def test_small_transcript_totals_are_exact() -> None:
    msgs = [{"role": "user", "content": "The task."}]
    for i in range(60):
        msgs += _chain(i, f"result {i} " * 40)
    _, _, report = run(msgs, context_window=2000)
    transcript = parse(msgs)
    from context.tokens import message_tokens

    assert not report.tokens_before_estimated
    assert report.tokens_before == sum(message_tokens(COUNTER, m) for m in transcript.messages)


@settings(max_examples=150, deadline=None)
@given(
    text=st.one_of(RESULT, st.text(max_size=3000), st.lists(TEXT, max_size=200).map("\n".join)),
    limit=st.integers(20, 400),
)
def test_compressed_output_is_smaller_and_its_floor_holds(text: str, limit: int) -> None:
    from context.compress import compress_output

    small, floor = compress_output(text, limit, COUNTER.count)
    real = COUNTER.count(text)
    assert floor <= real
    if small is None:
        assert real <= limit or floor == real
    else:
        assert real > limit and COUNTER.count(small) < real
