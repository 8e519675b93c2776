"""Memory: SQLite store, dedupe, TF-IDF recall in English and Chinese, the similarity floor, forget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from context.memory import MemoryStore
from foundation.errors import InvalidInput, NotFound
from tools.memory import forget, list_memories, recall, remember
from tools.runtime import CallContext, Runtime

pytestmark = pytest.mark.storage


def remember_(fact: str, confidence: float = 0.8, category: str | None = None, *, rt: Runtime) -> Any:
    return remember(fact, confidence, category, rt=rt, call=CallContext(tool="remember"))


@pytest.fixture
def rt(settings: Any) -> Any:
    runtime = Runtime(settings)
    yield runtime
    runtime.close()


def test_seed_example_prefers_pytest_over_docker(rt: Runtime) -> None:
    remember_("Prefers pytest for testing", 0.8, "preference", rt=rt)
    remember_("Uses Docker for containerization", 0.9, "tooling", rt=rt)
    messages = [
        {"role": "user", "content": "I'm building a Python FastAPI service."},
        {"role": "assistant", "content": "Great, FastAPI works well for that."},
        {"role": "user", "content": "How should I set up testing for it?"},
    ]
    result = recall(messages=messages, rt=rt)
    contents = [f.content for f in result.facts]
    assert contents == ["Prefers pytest for testing"]  # Docker is under the similarity floor
    assert result.context_used and result.memory_block.startswith("<memory>")
    assert "Prefers pytest for testing" in result.memory_block and result.memory_block.endswith("</memory>")
    top = result.facts[0]
    assert top.similarity > 0.1 and top.score == pytest.approx(0.6 * top.similarity + 0.4 * 0.8, abs=1e-3)


def test_chinese_recall_and_language_kept(rt: Runtime) -> None:
    remember_("用户喜欢用 pytest 写测试", 0.7, rt=rt)
    remember_("用户住在上海，喜欢喝咖啡", 0.9, rt=rt)
    remember_("The deployment target is Kubernetes", 0.9, rt=rt)
    result = recall(query="我们来写测试吧，用什么框架？", rt=rt)
    assert [f.content for f in result.facts] == ["用户喜欢用 pytest 写测试"]
    coffee = recall(query="上海 咖啡", rt=rt)
    assert coffee.facts[0].content == "用户住在上海，喜欢喝咖啡"


def test_recall_skips_tool_traffic_and_uses_last_three_turns(rt: Runtime) -> None:
    remember_("The project database is PostgreSQL", 0.6, rt=rt)
    remember_("Prefers dark mode in the editor", 0.6, rt=rt)
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "read", "arguments": '{"q": "editor dark mode"}'},
    }
    messages = [
        {"role": "user", "content": "Which database do we use? PostgreSQL or MySQL?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "editor dark mode theme settings"},
        {"role": "assistant", "content": "Let me check."},
    ]
    result = recall(messages=messages, rt=rt)
    assert [f.content for f in result.facts] == ["The project database is PostgreSQL"]


def test_no_context_falls_back_to_confidence_order_and_budget(rt: Runtime) -> None:
    for i, conf in enumerate([0.2, 0.9, 0.5]):
        remember_(f"Fact number {i} about something different {i * 'x'}", conf, rt=rt)
    result = recall(rt=rt)
    assert not result.context_used
    assert [f.confidence for f in result.facts] == [0.9, 0.5, 0.2]
    tight = recall(max_tokens=50, rt=rt)
    assert 1 <= len(tight.facts) < 3 and tight.tokens <= 50
    assert len(recall(top_k=1, rt=rt).facts) == 1


def test_near_identical_facts_are_deduplicated(rt: Runtime) -> None:
    first = remember_("Prefers pytest for testing", 0.6, rt=rt)
    again = remember_("prefers pytest for testing.", 0.9, rt=rt)
    stemmed = remember_("Preferring pytest for tests", 0.7, rt=rt)
    other = remember_("Prefers unittest for testing legacy code", 0.7, rt=rt)
    assert first.action == "created" and again.action == "updated" and stemmed.action == "updated"
    assert again.fact.id == first.fact.id == stemmed.fact.id and stemmed.fact.confidence == 0.7
    assert other.action == "created"
    assert list_memories(rt=rt).total == 2


def test_forget_by_id_and_query_and_paging(rt: Runtime) -> None:
    ids = [
        remember_(f"Fact {i}: the {word} service uses port {8000 + i}", rt=rt).fact.id
        for i, word in enumerate(["billing", "search", "auth", "mail", "chat"])
    ]
    page = list_memories(limit=2, rt=rt)
    assert page.total == 5 and len(page.facts) == 2 and page.next_offset == 2
    last = list_memories(offset=4, limit=2, rt=rt)
    assert len(last.facts) == 1 and last.next_offset is None
    gone = forget(id=ids[0], rt=rt)
    assert gone.deleted[0].id == ids[0]
    with pytest.raises(NotFound, match="Call recall"):
        forget(id=ids[0], rt=rt)
    by_query = forget(query="the auth service port", rt=rt)
    assert [f.content for f in by_query.deleted] == ["Fact 2: the auth service uses port 8002"]
    with pytest.raises(NotFound):
        forget(query="completely unrelated astronomy", rt=rt)
    with pytest.raises(InvalidInput):
        forget(rt=rt)
    assert list_memories(rt=rt).total == 3


@pytest.mark.anyio
async def test_a_page_past_the_end_says_so(make_settings: Any, tmp_path: Path) -> None:
    """list_memories paged past the end says where the end is (it was an empty page with no word)."""
    from tests.conftest import connect

    policy = tmp_path / "policy.toml"
    policy.write_text('version = 1\n[permissions]\nallow = ["remember"]\n')
    async with connect(make_settings(policy_file=policy)) as client:
        for i, word in enumerate(["billing", "search", "auth"]):
            fact = {"fact": f"The {word} service uses port {8000 + i}", "category": "ports" if i else None}
            assert not (await client.call_tool("remember", fact)).is_error
        past = (await client.call_tool("list_memories", {"offset": 40})).structured_content
        ports = (await client.call_tool("list_memories", {"offset": 2, "category": "ports"})).structured_content
        last = (await client.call_tool("list_memories", {"offset": 2})).structured_content
    assert past["facts"] == [] and past["next_offset"] is None
    assert past["note"] == "Offset 40 is past the end: 3 facts. Start again from offset 0."
    assert ports["note"] == "Offset 2 is past the end: 2 facts in category 'ports'. Start again from offset 0."
    assert len(last["facts"]) == 1 and last["note"] is None


def test_store_survives_reopen_and_rejects_bad_input(data_dir: Path, database_url: str | None) -> None:
    from foundation.storage import open_database

    first = open_database(data_dir, database_url)
    store = MemoryStore(first)
    store.remember("Likes green tea", 0.5)
    store.close()
    first.close()
    reopened = MemoryStore(open_database(data_dir, database_url))
    assert [f.content for f in reopened.all_facts()] == ["Likes green tea"]
    with pytest.raises(InvalidInput):
        reopened.remember("   ")
    with pytest.raises(InvalidInput):
        reopened.remember("x", confidence=2)
    with pytest.raises(InvalidInput, match="NUL"):
        reopened.remember("a\x00b")
    reopened.close()


def test_two_stores_on_one_database_write_concurrently(data_dir: Path, database_url: str | None) -> None:
    """Two server processes share the data (two Databases: separate connections), one writer at a time."""
    import threading

    from context.store import ContextStore
    from foundation.storage import open_database

    databases = [open_database(data_dir, database_url), open_database(data_dir, database_url)]
    stores = [MemoryStore(db) for db in databases]
    contexts = [ContextStore(db) for db in databases]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(25):
                stores[k].remember(f"Writer {k} fact {i}: service {k * 100 + i} listens on port {9000 + i}")
                contexts[k].put_state(f"conv-{k}", {"turn": i})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(stores[0].all_facts()) == 50
    assert contexts[1].get_state("conv-0") == {"turn": 24}
    for store in [*stores, *contexts]:
        store.close()
    for db in databases:
        db.close()
