"""Recall by meaning: word forms, synonyms/abbreviations, an optional embedding model fused with
the lexical score, weights from settings, and the paraphrase sets in tests/data."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import pytest

from bench._recall_eval import evaluate, load
from context.memory import MemoryStore, Weights, rank, recall_ranked
from tools.memory import EMBEDDER, recall, remember
from tools.runtime import CallContext, Runtime

pytestmark = pytest.mark.storage


class TrigramEmbedder:
    """A real (if crude) Embedder: hashed character trigrams, L2-normalised. Deterministic."""

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self._one(t) for t in texts]

    @staticmethod
    def _one(text: str) -> list[float]:
        vec = [0.0] * 64
        low = f"  {text.lower()}  "
        for k in range(len(low) - 2):
            vec[hashlib.md5(low[k : k + 3].encode()).digest()[0] % 64] += 1.0
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        return [x / norm for x in vec]


@pytest.fixture
def store(database: Any) -> Any:
    s = MemoryStore(database)
    yield s
    s.close()


@pytest.mark.parametrize(
    ("fact", "question"),
    [
        ("Ken is lactose intolerant.", "Ken's lactose intolerance"),
        ("Maria prefers e-mail over phone calls.", "what is Maria's email preference"),
        ("The main repo is hosted on GitLab.", "where is the repository"),
        ("The orders service stores data in PostgreSQL.", "which db do orders use"),
        ("Services run on a Kubernetes cluster.", "what runs our k8s workloads"),
        ("工资每月十号发放。", "几号发薪水"),
    ],
)
def test_word_forms_and_synonyms_find_what_words_alone_miss(store: MemoryStore, fact: str, question: str) -> None:
    store.remember(fact)
    store.remember("The office plants are watered on Mondays.")
    store.remember("Lunch is ordered from the Thai place.")
    ranked = recall_ranked(store, question)
    assert ranked and ranked[0].fact.content == fact
    assert ranked[0].lexical >= ranked[0].similarity - 1e-9 and ranked[0].dense is None


def test_paraphrase_sets_lexical_beats_words_alone() -> None:
    for set_name, floor in (("paraphrases", 0.9), ("held-out", 0.75)):
        rows = {name: (hit1, hit3) for name, _, hit1, hit3, _ in evaluate(set_name, embeddings=False)}
        before = rows["lexical (TF-IDF words, as before)"]
        after = rows["lexical (forms + synonyms)"]
        assert after[1] >= floor and after[1] > before[1] and after[0] >= before[0], (set_name, rows)


def test_dense_scores_fuse_and_are_cached(store: MemoryStore) -> None:
    for fact in ["Payroll runs through Gusto.", "Tom is on parental leave until March.", "Lena writes code in Neovim."]:
        store.remember(fact)
    embedder = TrigramEmbedder()
    ranked = recall_ranked(store, "payrol gusto", embedder, Weights(lexical=0.0, dense=1.0), min_similarity=0.0)
    assert ranked[0].fact.content == "Payroll runs through Gusto." and ranked[0].dense == 1.0
    calls = embedder.calls
    recall_ranked(store, "who uses neovim", embedder, Weights(), min_similarity=0.0)
    assert embedder.calls == calls + 1  # facts embedded once; only the question again
    words_only = recall_ranked(store, "payrol gusto", None, Weights(), min_similarity=0.0)
    assert all(s.dense is None for s in words_only)


def test_recall_tool_says_which_method_ranked(settings: Any) -> None:
    rt = Runtime(settings)
    call = CallContext(tool="remember")
    remember("Ken is lactose intolerant.", 0.8, rt=rt, call=call)
    remember("Payroll runs through Gusto.", 0.8, rt=rt, call=call)
    plain = recall(query="does Ken have dietary restrictions", rt=rt)
    assert plain.method == "lexical" and plain.facts[0].content == "Ken is lactose intolerant."
    assert plain.facts[0].dense is None and plain.note
    rt2 = Runtime(settings)
    EMBEDDER.provide(rt2, (TrigramEmbedder(), ""))  # a runtime whose embedding model is configured
    fused = recall(query="payroll provider", rt=rt2)
    assert fused.method == "lexical+dense" and fused.facts[0].dense is not None
    assert recall(rt=rt2).method == "confidence"
    rt.close()
    rt2.close()


def test_weights_come_from_settings(make_settings: Any) -> None:
    settings = make_settings(memory_dense_weight=0.2, memory_confidence_weight=0.1, memory_expansion_weight=0.5)
    weights = Weights.from_settings(settings)
    assert (weights.lexical, weights.dense, weights.confidence, weights.expansion) == (0.5, 0.2, 0.1, 0.5)


def test_no_context_orders_by_confidence(store: MemoryStore) -> None:
    store.remember("low", 0.2)
    store.remember("high", 0.9)
    assert [s.fact.content for s in recall_ranked(store, "")] == ["high", "low"]
    assert [s.fact.content for s in rank(store.all_facts(), [])] == ["high", "low"]


def test_paraphrase_data_is_well_formed() -> None:
    for name in ("paraphrases", "held-out"):
        data = load(name)
        ids = {f["id"] for f in data["facts"]}
        assert len(ids) == len(data["facts"]) and all(q["answer"] in ids for q in data["questions"])
        assert any("\u4e00" <= ch <= "\u9fff" for q in data["questions"] for ch in q["q"])  # Chinese too
