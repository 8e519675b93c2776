"""The shared analysis: Porter stems identical to SQLite FTS5's porter tokenizer, jieba words,
stop/question words of both languages, diacritics, and jieba never imported at start-up."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from indexing.analyzer import analyze, stem

WORDS = """running runs run baseline baselines happiness relational conditional generalization
    hopefully caresses ponies cats feed agreed plastered motoring sing conflated troubled sized hopping
    tanned falling hissing fizzed failing filing happy sky relate probate rate cease controlling
    rolling electrical electricity formalize adjustable dependent adoption effective bowdlerize
    revenue revenues growth analysis analyses triplicate formative hopeful goodness""".split()  # noqa: SIM905


def test_porter_matches_sqlite_fts5() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter ascii')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    conn.executemany("INSERT INTO t(rowid, x) VALUES(?, ?)", list(enumerate(WORDS, start=1)))
    for doc, term in conn.execute("SELECT doc, term FROM v"):
        assert stem(WORDS[doc - 1]) == term, WORDS[doc - 1]


def test_english_stems_and_stop_words() -> None:
    assert analyze("The baselines were running") == ["baselin", "run"]
    assert analyze("baseline") == analyze("baselines")
    assert analyze("run") == analyze("running") == analyze("runs")
    assert analyze("What is the revenue?") == ["revenu"]


def test_diacritics_and_width_folded() -> None:
    assert analyze("Café") == analyze("cafe") == ["cafe"]
    assert analyze("ＡＢＣ naïve") == ["abc", "naiv"]


def test_chinese_words_and_question_words() -> None:
    assert analyze("客户") == ["客户"]
    # jieba runs without HMM: a word missing from its dictionary (营收) is cut into characters the
    # same way in every context, so documents and questions agree (the ranker rewards adjacency).
    assert analyze("营收") == ["营", "收"]
    assert analyze("客户的营收是多少？") == ["客户", "营", "收"]
    assert analyze("谁设计了该教堂？") == ["设计", "该", "教堂"]


def test_mixed_latin_and_chinese() -> None:
    assert analyze("Q3营收增长率") == ["q3", "营", "收", "增长率"]
    assert analyze("2024年Q3营收") == ["2024", "年", "q3", "营", "收"]


def test_symbols_never_become_terms() -> None:
    assert analyze('4.1 C++ AND NEAR( "x": -y 🙂') == ["4", "1", "c", "near", "x", "y"]
    for term in analyze("a:b (c) {d} [e] 'f' \"g\" h* ^i"):
        assert re.fullmatch(r"[^\W_]+", term)


def test_jieba_not_imported_at_startup() -> None:
    code = (
        "import sys, mcp_server.registry, tools.documents, indexing.search, indexing.indexer;"
        "print('jieba' in sys.modules, 'rjieba' in sys.modules, 'regex' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]


def test_jieba_loads_without_pkg_resources_which_stays_importable() -> None:
    """jieba's import would pull in setuptools' pkg_resources (~0.5 s scanning every distribution);
    it is blocked only while jieba imports, and segmentation is unchanged."""
    code = (
        "import sys, importlib.util\n"
        "from indexing.analyzer import jieba_tokenizer\n"
        "words = jieba_tokenizer().lcut('潘淑是哪里人', HMM=False)\n"
        "print('pkg_resources' in sys.modules, 'pkg_resources' in sys.modules and sys.modules['pkg_resources'] is None)\n"
        "if importlib.util.find_spec('pkg_resources') is not None:\n"
        "    import warnings; warnings.simplefilter('ignore'); import pkg_resources\n"
        "print('/'.join(words))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[:2] == ["False", "False"]
    import jieba

    assert out[2] == "/".join(jieba.Tokenizer().lcut("潘淑是哪里人", HMM=False))


def test_jieba_loads_after_the_working_folder_is_gone(tmp_path: Path) -> None:
    """MCP hosts start servers in any folder, which may be removed while the server runs: jieba's files
    are opened from its own folder, not relative to the working folder."""
    gone, cache = tmp_path / "gone", tmp_path / "cache"
    gone.mkdir()
    code = (
        "import os, sys\n"
        f"os.chdir({str(gone)!r}); os.rmdir({str(gone)!r})\n"
        "from pathlib import Path\n"
        "from indexing.analyzer import jieba_tokenizer, set_cache_dir\n"
        f"set_cache_dir(Path({str(cache)!r}))\n"
        "print('/'.join(jieba_tokenizer().lcut('潘淑是哪里人', HMM=False)))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    import jieba

    assert done.stdout.split() == ["/".join(jieba.Tokenizer().lcut("潘淑是哪里人", HMM=False))]


def test_dictionary_cache_in_data_dir_segments_the_same(tmp_path: Path) -> None:
    import jieba

    from indexing.analyzer import _load_cached, jieba_tokenizer

    text = "Q3营收增长率达到15%，客户数量明显增加。潘淑是哪里人？"
    expected = jieba_tokenizer().lcut(text, HMM=False)
    first, second = jieba.Tokenizer(), jieba.Tokenizer()
    assert _load_cached(first, tmp_path)  # builds and writes the pickle
    assert [p.suffix for p in tmp_path.iterdir()] == [".pickle"]
    assert _load_cached(second, tmp_path)  # loads it
    assert first.lcut(text, HMM=False) == second.lcut(text, HMM=False) == expected
    assert second.FREQ == first.FREQ and second.total == first.total


def test_a_damaged_dictionary_cache_falls_back_to_jieba(tmp_path: Path) -> None:
    import jieba

    from indexing.analyzer import _load_cached

    first = jieba.Tokenizer()
    assert _load_cached(first, tmp_path)
    cache = next(tmp_path.iterdir())
    cache.write_bytes(cache.read_bytes()[: cache.stat().st_size // 2])  # cut off in the middle
    second = jieba.Tokenizer()
    assert not _load_cached(second, tmp_path)  # the caller then initialises jieba its own way
    second.initialize()
    assert second.lcut("潘淑是哪里人", HMM=False) == first.lcut("潘淑是哪里人", HMM=False)


def _han_phrases() -> list[str]:
    """The Han runs of the Chinese questions in tests/data (real words for the segmenters to disagree on)."""
    runs: list[str] = []
    for name in ("meaning_queries.jsonl", "meaning_tuning.jsonl"):
        for line in (Path(__file__).parent / "data" / name).read_text(encoding="utf-8").splitlines():
            runs += re.findall(r"[\u4e00-\u9fff]+", json.loads(line)["query"])
    return runs


_PHRASES = _han_phrases()


@pytest.fixture(scope="module")
def clean_jieba() -> Any:
    """jieba's own segmenter with its dictionary and no user words (copied per example)."""
    from indexing.analyzer import jieba_tokenizer

    loaded = jieba_tokenizer()
    import jieba

    clean = jieba.Tokenizer()
    clean.FREQ, clean.total, clean.initialized = dict(loaded.FREQ), loaded.total, True
    return clean


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.sampled_from(_PHRASES) | st.text(alphabet="".join(set("".join(_PHRASES))), min_size=1,
                                                          max_size=6), min_size=1, max_size=8),
       picks=st.lists(st.tuples(st.integers(0, 10_000), st.integers(2, 4), st.none() | st.integers(1, 50_000)),
                      max_size=3))
def test_jieba_rs_cuts_as_jieba_does(clean_jieba: Any, parts: list[str], picks: list[tuple[int, int, int | None]]) -> None:
    """The analysis's segmenter (jieba-rs when installed) gives jieba's own `lcut(HMM=False)` pieces, with
    user words (with and without a frequency) taken from the text itself."""
    pytest.importorskip("rjieba")
    import jieba

    from indexing.analyzer import _rust_segmenter

    text = "".join(parts)
    words = {text[at % len(text):at % len(text) + size]: freq for at, size, freq in picks if len(text) >= size}
    python = jieba.Tokenizer()
    python.FREQ, python.total, python.initialized = dict(clean_jieba.FREQ), clean_jieba.total, True
    for word, freq in words.items():
        python.add_word(word, freq)
    rust = _rust_segmenter(words)
    assert rust is not None and rust(text) == python.lcut(text, HMM=False)
