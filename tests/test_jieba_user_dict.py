"""The jieba user dictionary (GENERALAGENT_JIEBA_USER_DICT): domain words (names, products) stay whole in the
index and in queries; the file is read again when it changes, and the index is re-analysed with it."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from indexing.analyzer import analyze, set_user_words

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def no_user_words() -> Iterator[None]:
    set_user_words({})
    yield
    set_user_words({})  # the analyzer is the process's: leave it as found


def _terms(data_dir: Path) -> str:
    with sqlite3.connect(data_dir / "index.sqlite3") as conn:
        return " ".join(row[0] for row in conn.execute("SELECT terms FROM chunks"))


def _touch_later(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    later = time.time_ns() + 5_000_000_000
    os.utime(path, ns=(later, later))


async def test_user_words_stay_whole_and_a_changed_file_is_read_again(make_settings: Any, workspace: Path,
                                                                        tmp_path: Path) -> None:
    from tests.conftest import connect

    words = tmp_path / "words.txt"
    words.write_text("# our names\n潘淑\n星河云图 10\n", encoding="utf-8")
    (workspace / "a.txt").write_text("潘淑是吴国的皇后。星河云图是我们的产品。", encoding="utf-8")
    settings = make_settings(jieba_user_dict=words)
    async with connect(settings) as client:
        done = await client.call_tool("index_path", {"path": "a.txt"})
        assert not done.is_error, done.content[0].text
        assert {"潘淑", "星河云图"} <= set(_terms(settings.data_dir).split())
        found = await client.call_tool("search_documents", {"query": "星河云图"})
        assert found.structured_content["hits"], found.content[0].text
        _touch_later(words, "星河云图\n")  # 潘淑 taken out
        time.sleep(1.1)  # the file is looked at once a second at most
        await client.call_tool("search_documents", {"query": "皇后"})
        terms = set(_terms(settings.data_dir).split())
        assert "星河云图" in terms and "潘淑" not in terms and {"潘", "淑"} <= terms
    assert analyze("潘淑和吴国") == ["潘", "淑", "吴国"]  # a word jieba knew (吴国) is still known


def test_a_word_jieba_knew_is_restored_when_taken_out() -> None:
    before = analyze("吴国皇后")
    set_user_words({"吴国皇后": None})
    assert analyze("吴国皇后") == ["吴国皇后"]
    set_user_words({"吴国": 5})
    set_user_words({})
    assert analyze("吴国皇后") == before


async def test_export_and_doctor_never_re_analyse_the_index_without_the_dictionary(
    make_settings: Any, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """A command run in its own process (export, import, doctor) opens the index as stored: it does not know
    the server's user dictionary, and must not re-analyse the index without it."""
    from mcp_server.cli import main
    from tests.conftest import connect

    words = tmp_path / "words.txt"
    words.write_text("星河云图\n", encoding="utf-8")
    (workspace / "a.txt").write_text("星河云图是我们的产品。", encoding="utf-8")
    settings = make_settings(jieba_user_dict=words)
    async with connect(settings) as client:
        assert not (await client.call_tool("index_path", {"path": "a.txt"})).is_error
    assert "星河云图" in _terms(settings.data_dir).split()
    set_user_words({})  # as in a new process that has not read the dictionary
    monkeypatch.delenv("GENERALAGENT_JIEBA_USER_DICT", raising=False)
    data = ["--data-dir", str(settings.data_dir)]
    assert await anyio.to_thread.run_sync(main, [*data, "export", str(tmp_path / "state.jsonl")]) == 0
    await anyio.to_thread.run_sync(main, [*data, "doctor"])  # (its checks run an event loop of their own)
    capsys.readouterr()
    assert "星河云图" in _terms(settings.data_dir).split()  # the stored words, as the server made them
