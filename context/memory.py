"""Remembered facts in SQLite and their recall by relevance to the conversation.

Facts keep the language they were written in. Terms come from the search analyzer
(`indexing.analyzer.analyze`: stemming for English, jieba for Chinese), so recall works the
same way search does. `recall_ranked` scores meaning as well as words: the terms are expanded
with word forms and a small synonym/abbreviation table (context/synonyms.py) at a lower weight,
and when an `Embedder` is given, the dense cosine (relative to the other facts) is fused with
the lexical one. score = (1 - c) x similarity + c x confidence (weights in `Weights`, from
settings); facts below a similarity floor are left out when there is a context; with no context,
confidence decides.
"""

from __future__ import annotations

import math
import threading
import time
import unicodedata
from collections import Counter as Bag
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from context.messages import Msg, content_text
from foundation import sqlite_db
from foundation.errors import InvalidInput, NotFound

SIMILARITY_WEIGHT = 0.6
CONFIDENCE_WEIGHT = 0.4
MIN_SIMILARITY = 0.1
DUPLICATE_SIMILARITY = 0.9
MAX_FACT_CHARS = 2000
CONTEXT_TURNS = 3

_SCHEMA = (
    """
    CREATE TABLE memories (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        content TEXT NOT NULL,
        category TEXT,
        confidence REAL NOT NULL,
        source TEXT NOT NULL,
        terms TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX memories_updated ON memories(updated_at);
    """,
)

Analyzer = Callable[[str], list[str]]


def default_analyzer(text: str) -> list[str]:
    from indexing.analyzer import analyze

    return analyze(text)


@dataclass(frozen=True)
class Fact:
    id: int
    content: str
    category: str | None
    confidence: float
    source: str
    created_at: float
    updated_at: float
    terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scored:
    fact: Fact
    similarity: float
    score: float
    lexical: float = 0.0
    dense: float | None = None


class Embedder(Protocol):
    """Any embedding model: texts in, one vector (list of floats) per text out. An optional
    `embed_query(texts)` is used for the question when the model embeds queries differently."""

    def embed(self, texts: list[str]) -> list[list[float]]: ...


@dataclass(frozen=True)
class Weights:
    """How recall mixes its signals (defaults measured on tests/data/memory_paraphrases.json)."""

    lexical: float = 0.5
    dense: float = 0.5
    confidence: float = 0.4
    expansion: float = 1.0  # synonym and word-form terms, relative to the words themselves

    @classmethod
    def from_settings(cls, settings: object) -> Weights:
        return cls(
            float(getattr(settings, "memory_lexical_weight", cls.lexical)),
            float(getattr(settings, "memory_dense_weight", cls.dense)),
            float(getattr(settings, "memory_confidence_weight", cls.confidence)),
            float(getattr(settings, "memory_expansion_weight", cls.expansion)),
        )


def normalize_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split()).rstrip(".。!！")


def cosine(a: dict[str, float], b: dict[str, float]) -> float:
    if not a or not b:
        return 0.0
    if len(a) > len(b):
        a, b = b, a
    dot = sum(w * b.get(t, 0.0) for t, w in a.items())
    norm = math.sqrt(sum(w * w for w in a.values())) * math.sqrt(sum(w * w for w in b.values()))
    return dot / norm if norm else 0.0


def tfidf(terms: Iterable[str], idf: dict[str, float], default_idf: float) -> dict[str, float]:
    counts = Bag(terms)
    return {t: (1 + math.log(n)) * idf.get(t, default_idf) for t, n in counts.items()}


def idf_table(docs: list[tuple[str, ...]]) -> tuple[dict[str, float], float]:
    df: Bag[str] = Bag()
    for terms in docs:
        df.update(set(terms))
    n = len(docs)
    return {t: math.log((n + 1) / (c + 1)) + 1 for t, c in df.items()}, math.log(n + 1) + 1


def rank(
    facts: list[Fact],
    context_terms: list[str],
    min_similarity: float = MIN_SIMILARITY,
    confidence_weight: float = CONFIDENCE_WEIGHT,
) -> list[Scored]:
    """Facts by score (words only); with context terms, those under the similarity floor are dropped."""
    if not context_terms:
        ordered = sorted(facts, key=lambda f: (-f.confidence, -f.updated_at))
        return [Scored(f, 0.0, round(confidence_weight * f.confidence, 4)) for f in ordered]
    idf, default = idf_table([f.terms for f in facts])
    query = tfidf(context_terms, idf, default)
    out = []
    for fact in facts:
        sim = cosine(tfidf(fact.terms, idf, default), query)
        if sim >= min_similarity:
            score = SIMILARITY_WEIGHT * sim + CONFIDENCE_WEIGHT * fact.confidence
            out.append(Scored(fact, round(sim, 4), round(score, 4)))
    out.sort(key=lambda s: (-s.score, -s.fact.updated_at))
    return out


def _fact(row: tuple[object, ...]) -> Fact:
    fact_id, content, category, confidence, source, created, updated, terms = row
    return Fact(
        int(fact_id),  # type: ignore[call-overload]
        str(content),
        None if category is None else str(category),
        float(confidence),  # type: ignore[arg-type]
        str(source),
        float(created),  # type: ignore[arg-type]
        float(updated),  # type: ignore[arg-type]
        tuple(str(terms).split()),
    )


class MemoryStore:
    """Facts in one SQLite file (WAL; writes in BEGIN IMMEDIATE transactions)."""

    def __init__(self, path: Path, analyzer: Analyzer = default_analyzer) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.analyze = analyzer
        self._lock = threading.Lock()
        self._db = sqlite_db.connect(path, timeout=30)
        with self._lock:
            sqlite_db.migrate(self._db, _SCHEMA)

    # -- reads
    def all_facts(self) -> list[Fact]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, content, category, confidence, source, created_at, updated_at, terms FROM memories"
            ).fetchall()
        return [_fact(row) for row in rows]

    def get(self, fact_id: int) -> Fact:
        for fact in self.all_facts_by_id([fact_id]):
            return fact
        raise NotFound(f"No memory with id {fact_id}. Call list_memories to see the ids.")

    def all_facts_by_id(self, ids: list[int]) -> list[Fact]:
        marks = ",".join("?" * len(ids))
        with self._lock:
            rows = self._db.execute(
                "SELECT id, content, category, confidence, source, created_at, updated_at, terms "
                f"FROM memories WHERE id IN ({marks})",
                ids,
            ).fetchall()
        return [_fact(row) for row in rows]

    def page(self, offset: int, limit: int, category: str | None = None) -> tuple[list[Fact], int]:
        where, args = ("WHERE category = ?", [category]) if category else ("", [])
        with self._lock:
            total = self._db.execute(f"SELECT COUNT(*) FROM memories {where}", args).fetchone()[0]
            rows = self._db.execute(
                "SELECT id, content, category, confidence, source, created_at, updated_at, terms "
                f"FROM memories {where} ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
                [*args, limit, offset],
            ).fetchall()
        return [_fact(row) for row in rows], total

    # -- writes
    def remember(
        self, content: str, confidence: float = 0.8, category: str | None = None, source: str = "client"
    ) -> tuple[Fact, str]:
        """Store a fact, or update the near-identical one already stored: (fact, 'created'|'updated')."""
        content = " ".join(content.split())
        if not content:
            raise InvalidInput("fact is empty. Pass one short sentence, e.g. 'Prefers pytest for testing'.")
        if len(content) > MAX_FACT_CHARS:
            raise InvalidInput(
                f"fact is {len(content)} characters; keep it under {MAX_FACT_CHARS} (one fact per call)."
            )
        if not 0.0 <= confidence <= 1.0:
            raise InvalidInput("confidence must be between 0 and 1.")
        terms = self.analyze(content)
        now = time.time()
        with self._lock, sqlite_db.write(self._db):
            duplicate = self._duplicate_of(content, terms)
            if duplicate is not None:
                self._db.execute(
                    "UPDATE memories SET confidence = ?, category = COALESCE(?, category), updated_at = ? WHERE id = ?",
                    (confidence, category, now, duplicate),
                )
                fact_id, action = duplicate, "updated"
            else:
                cursor = self._db.execute(
                    "INSERT INTO memories(content, category, confidence, source, terms, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (content, category, confidence, source, " ".join(terms), now, now),
                )
                fact_id, action = int(cursor.lastrowid or 0), "created"
        return self.get(fact_id), action

    def _duplicate_of(self, content: str, terms: list[str]) -> int | None:
        """Id of a stored near-identical fact: same normalised text, or TF-IDF cosine >= 0.9."""
        wanted = normalize_text(content)
        rows = self._db.execute("SELECT id, content, terms FROM memories").fetchall()
        docs = [tuple(r[2].split()) for r in rows]
        idf, default = idf_table([*docs, tuple(terms)])
        mine = tfidf(terms, idf, default)
        best, best_sim = None, 0.0
        for (fact_id, text, _), doc in zip(rows, docs, strict=True):
            if normalize_text(text) == wanted:
                return int(fact_id)
            sim = cosine(tfidf(doc, idf, default), mine) if terms else 0.0
            if sim > best_sim:
                best, best_sim = int(fact_id), sim
        return best if best_sim >= DUPLICATE_SIMILARITY else None

    def delete(self, ids: list[int]) -> int:
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        with self._lock, sqlite_db.write(self._db):
            cursor = self._db.execute(f"DELETE FROM memories WHERE id IN ({marks})", ids)
        return cursor.rowcount

    def close(self) -> None:
        with self._lock:
            self._db.close()


def context_text(msgs: list[Msg], turns: int = CONTEXT_TURNS) -> str:
    """The last `turns` turns: user messages and assistant messages without tool calls."""
    picked: list[str] = []
    users = 0
    for msg in reversed(msgs):
        if msg.role == "user" or (msg.role == "assistant" and not msg.calls):
            text = content_text(msg.content).strip()
            if text:
                picked.append(text)
            if msg.role == "user":
                users += 1
                if users >= turns:
                    break
    return "\n".join(reversed(picked))


def format_block(chosen: list[Scored]) -> str:
    """The `<memory>` block a client puts into its prompt."""
    lines = [fact_line(s.fact) for s in chosen]
    return "<memory>\n" + "\n".join(lines) + "\n</memory>" if lines else "<memory>\n</memory>"


def fact_line(fact: Fact) -> str:
    label = f"[{fact.category}] " if fact.category else ""
    return f"- {label}{fact.content} (confidence {fact.confidence:.2f})"


def select(
    ranked: list[Scored], max_tokens: int, top_k: int, count: Callable[[str], int]
) -> tuple[list[Scored], int]:
    """Facts by score until the token budget (real counts, block framing included) or top_k."""
    used = count("<memory>\n\n</memory>")
    chosen: list[Scored] = []
    for item in ranked:
        if len(chosen) >= top_k:
            break
        cost = count(fact_line(item.fact)) + 1
        if used + cost > max_tokens:
            continue
        chosen.append(item)
        used += cost
    return chosen, used


# ---------------------------------------------------------------- recall by meaning


_expanded: dict[str, tuple[list[str], list[str]]] = {}
_vectors: dict[tuple[int, str], list[float]] = {}
_CACHE_LIMIT = 20_000


def expanded(text: str, analyzer: Analyzer) -> tuple[list[str], list[str]]:
    from context.synonyms import expand

    hit = _expanded.get(text)
    if hit is None:
        if len(_expanded) >= _CACHE_LIMIT:
            _expanded.clear()
        hit = _expanded[text] = expand(text, analyzer)
    return hit


def lexical_scores(facts: list[Fact], query: str, analyzer: Analyzer, expansion: float) -> list[float]:
    """TF-IDF cosine of each fact with the query over words plus weighted expansion terms."""
    docs = [expanded(f.content, analyzer) for f in facts]
    terms, extra = expanded(query, analyzer)
    idf, default = idf_table([tuple(a + b) for a, b in docs])

    def with_extra(words: dict[str, float], more: list[str]) -> dict[str, float]:
        out = dict(words)
        for term, weight in tfidf(more, idf, default).items():
            out[term] = out.get(term, 0.0) + expansion * weight
        return out

    plain = tfidf(terms, idf, default)
    wanted = with_extra(plain, extra)
    scores = []
    for words, more in docs:  # each fact's word vector is computed once, for both comparisons
        base = tfidf(words, idf, default)
        # never below the words alone: expansion terms add meaning, they must not dilute a match
        scores.append(max(cosine(base, plain), cosine(with_extra(base, more), wanted)))
    return scores


def dense_scores(facts: list[Fact], query: str, embedder: Embedder) -> list[float]:
    """Each fact's dense cosine with the query, relative to the others: the best is 1, the
    median and below 0 (0 for all when no fact stands out)."""
    missing = [f.content for f in facts if (id(embedder), f.content) not in _vectors]
    if missing:
        if len(_vectors) + len(missing) > _CACHE_LIMIT:
            _vectors.clear()
        for text, vec in zip(missing, embedder.embed(missing), strict=True):
            _vectors[(id(embedder), text)] = list(vec)
    ask = getattr(embedder, "embed_query", embedder.embed)
    q = list(ask([query])[0])
    raw = [_cos(_vectors[(id(embedder), f.content)], q) for f in facts]
    ordered = sorted(raw)
    median, best = ordered[len(ordered) // 2], ordered[-1]
    if best - median < 0.01:
        return [0.0] * len(raw)
    return [max(0.0, (r - median) / (best - median)) for r in raw]


def _cos(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def recall_ranked(
    store: MemoryStore,
    query: str,
    embedder: Embedder | None = None,
    weights: Weights = Weights(),
    min_similarity: float = MIN_SIMILARITY,
    facts: list[Fact] | None = None,
) -> list[Scored]:
    """The stored facts ranked for `query` (see the module docstring); no query: by confidence.
    `facts`: the store's facts when the caller has read them already."""
    facts = store.all_facts() if facts is None else facts
    if not query.strip() or not facts:
        return rank(facts, [], min_similarity, weights.confidence)
    lexical = lexical_scores(facts, query, store.analyze, weights.expansion)
    dense = dense_scores(facts, query, embedder) if embedder is not None else None
    out = []
    for k, fact in enumerate(facts):
        sim = lexical[k]
        if dense is not None:
            sim = (weights.lexical * lexical[k] + weights.dense * dense[k]) / max(weights.lexical + weights.dense, 1e-9)
        if sim >= min_similarity:
            score = (1 - weights.confidence) * sim + weights.confidence * fact.confidence
            d = None if dense is None else round(dense[k], 4)
            out.append(Scored(fact, round(sim, 4), round(score, 4), round(lexical[k], 4), d))
    out.sort(key=lambda s: (-s.score, -s.fact.updated_at))
    return out
