"""Token counting: offline encodings, model mapping, estimates, the count_tokens/context_status tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from context import tokens
from foundation.errors import InvalidInput
from tools.context_tokens import context_status, count_tokens
from tools.runtime import Runtime


@pytest.fixture(autouse=True)
def no_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken.load

    real = tiktoken.load.read_file

    def guarded(blobpath: str) -> bytes:
        assert not blobpath.startswith("http"), f"tiktoken tried to download {blobpath}"
        return real(blobpath)

    monkeypatch.setattr(tiktoken.load, "read_file", guarded)


def test_cl100k_offline_exact_counts() -> None:
    counter = tokens.counter_for("gpt-4")
    assert (counter.name, counter.estimate) == ("cl100k_base", False)
    assert counter.count("hello world") == 2
    assert counter.count("<|endoftext|>") > 1  # special-token text counted as plain text, never an error
    assert tokens.counter_for("gpt-4-turbo").encoding is counter.encoding  # loaded once


@pytest.mark.parametrize(
    ("model", "wanted", "exact"),
    [
        ("gpt-4o", "o200k_base", True),
        ("gpt-4o-mini-2024-07-18", "o200k_base", True),
        ("openai/gpt-5", "o200k_base", True),
        ("o3-mini", "o200k_base", True),
        ("gpt-3.5-turbo", "cl100k_base", True),
        ("claude-sonnet-4-5", "cl100k_base", False),
        ("llama3.1:8b", "o200k_base", False),
        ("some-local-model", "cl100k_base", False),
        (None, "cl100k_base", False),
    ],
)
def test_model_map(model: str | None, wanted: str, exact: bool) -> None:
    assert tokens.encoding_for_model(model) == (wanted, exact)


def test_o200k_is_bundled_verified_and_exact(tmp_path: Path) -> None:
    import hashlib
    import lzma

    data = lzma.decompress(tokens.BUNDLED_O200K.read_bytes())
    assert hashlib.sha256(data).hexdigest() == tokens.O200K_SHA256  # tiktoken's own expected hash
    bogus = tmp_path / "encodings"
    bogus.mkdir()
    (bogus / "o200k_base.tiktoken").write_bytes(b"not the real file")  # checksum mismatch: ignored
    tokens.add_encoding_dir(bogus)
    counter = tokens.counter_for("gpt-4o")
    assert (counter.name, counter.estimate) == ("o200k_base", False)
    assert counter.count("hello world") == 2
    chinese = "上下文管理：用户的原话必须逐字保留，待办事项也不能丢。" * 4
    assert counter.count(chinese) < tokens.counter_for("gpt-4").count(chinese)  # o200k packs CJK better
    assert counter.encoding.decode(counter.encoding.encode_ordinary(chinese)) == chinese


def test_count_tokens_tool_text_and_messages() -> None:
    text = count_tokens(text="hello world", model="gpt-4")
    assert text.tokens == 2 and not text.estimate and text.exact and text.messages is None
    assert count_tokens(text="hello world", model="gpt-4o").encoding == "o200k_base"
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "你好，世界"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "result"},
    ]
    counted = count_tokens(messages=msgs, model="claude-3-5-haiku")
    assert counted.estimate and not counted.exact and counted.messages == 4
    assert set(counted.by_role) == {"system", "user", "assistant", "tool"}
    assert counted.tokens == sum(counted.by_role.values()) + tokens.TOKENS_REPLY_PRIMING
    with pytest.raises(InvalidInput, match="exactly one"):
        count_tokens(text="a", messages=msgs)


@pytest.mark.parametrize(("used", "level"), [(1000, "info"), (7600, "warning"), (9600, "critical")])
def test_context_status_levels(settings: Any, used: int, level: str) -> None:
    rt = Runtime(settings)
    status = context_status(10_000, prompt_tokens=used, rt=rt)
    assert status.level == level and status.tokens_left == 10_000 - used
    assert ("compact_context" in status.recommendation) == (level != "info")
    custom = context_status(10_000, prompt_tokens=used, warning_ratio=0.05, critical_ratio=0.99, rt=rt)
    assert custom.level == ("warning" if used < 9900 else "critical")
    with pytest.raises(InvalidInput):
        context_status(10_000, prompt_tokens=1, warning_ratio=0.9, critical_ratio=0.8, rt=rt)
    rt.close()


# ---------------------------------------------------------------- cheap bounds (no tokenising)

ALPHABET = st.sampled_from(
    list("abcXYZ019 '\n\t.,:;/\"{}()[]-_=")
    + ["don't", "it's", "O'Reilly", "é", "ï", "你好", "\u0301", "\u00a0", "—", "１２", "\ud800", "😀"]
)


@hsettings(max_examples=400, deadline=None)
@given(text=st.lists(ALPHABET, max_size=60).map("".join), model=st.sampled_from(["gpt-4", "gpt-4o"]))
def test_bounds_bracket_the_real_count(text: str, model: str) -> None:
    counter = tokens.counter_for(model)  # o200k_base when its file is on this machine
    real = counter.count(text)
    assert tokens.lower_bound(text) <= real <= tokens.upper_bound(text)
    assert tokens.lower_bound(text) <= tokens.rough_tokens(text) <= tokens.upper_bound(text)
    # o200k_base's file may be absent here: check the bound against its regex pieces (each piece is
    # at least one token), on the text as tiktoken sees it (lone surrogates replaced).
    import regex

    seen = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    assert tokens.lower_bound(text) <= len(regex.findall(tokens._o200k_pattern(), seen))


def test_bounds_on_real_text() -> None:
    counter = tokens.counter_for("gpt-4")
    for path in sorted(Path("context").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert tokens.lower_bound(text) <= counter.count(text) <= tokens.upper_bound(text)


def test_total_tokens_exact_when_small_estimated_when_large() -> None:
    from bench.context_bench import make_transcript
    from context.messages import parse

    counter = tokens.counter_for("gpt-4")
    small = parse(make_transcript(20)).messages
    exact = sum(tokens.message_tokens(counter, m) for m in small)
    assert tokens.total_tokens(counter, small, {}, {}) == (exact, False)
    large = parse(make_transcript(2000)).messages
    exact = sum(tokens.message_tokens(counter, m) for m in large)
    known = {i: tokens.message_tokens(counter, large[i]) for i in range(10)}
    estimate, estimated = tokens.total_tokens(counter, large, known, {})
    assert estimated and abs(estimate - exact) <= 0.1 * exact
