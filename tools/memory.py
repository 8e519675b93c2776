"""Memory tools: remember, recall, forget, list_memories (facts in SQLite, recalled by relevance)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from pydantic import BaseModel, Field, WithJsonSchema

from context.memory import (
    Embedder,
    Fact,
    MemoryStore,
    Weights,
    context_text,
    format_block,
    rank,
    recall_ranked,
    select,
)
from context.messages import parse
from context.tokens import counter_for
from foundation.bounding import next_offset, past_end_note
from foundation.errors import GeneralAgentError, InvalidInput, NotFound
from foundation.schemas import TEXT_MESSAGE_SCHEMA
from tools.index_services import embedding_provider
from tools.runtime import CallContext, Runtime, Service

FORGET_MIN_SIMILARITY = 0.5


_MEMORY_STORE: Service[MemoryStore] = Service(lambda rt: MemoryStore(rt.database))


def memory_store(rt: Runtime) -> MemoryStore:
    return _MEMORY_STORE.of(rt)


class _ProviderEmbedder:
    """The search index's embedding provider (indexing.embeddings, when configured) as an Embedder."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, row)) for row in self.provider.embed(texts, query=False)]

    def embed_query(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, row)) for row in self.provider.embed(texts, query=True)]


def _find_embedder(rt: Runtime) -> tuple[Embedder | None, str]:
    """(the embedding model the settings configure, or None; why not, when None)."""
    try:
        provider = embedding_provider(rt)
    except GeneralAgentError as exc:
        return None, str(exc)
    if provider is None:
        return None, "no embedding model configured (see embedding_provider)"
    return _ProviderEmbedder(provider), ""


EMBEDDER: Service[tuple[Embedder | None, str]] = Service(_find_embedder)


class MemoryFact(BaseModel):
    id: int = Field(description="The fact's id (for forget).")
    content: str = Field(description="The fact, in the language it was written in.")
    category: str | None = Field(description="Category, e.g. preference, project, person.")
    confidence: float = Field(description="Confidence 0-1.")
    source: str = Field(description="Who stored it.")
    updated: str = Field(description="Last update, ISO 8601 UTC.")


class ScoredFact(MemoryFact):
    similarity: float = Field(description="Similarity to the context, 0-1 (0 without context).")
    lexical: float = Field(description="Word similarity (TF-IDF over words, their forms and synonyms).")
    dense: float | None = Field(description="Embedding similarity relative to the other facts (null: no model).")
    score: float = Field(description="(1 - c) x similarity + c x confidence (c: memory_confidence_weight).")


def _model(fact: Fact) -> MemoryFact:
    return MemoryFact(
        id=fact.id,
        content=fact.content,
        category=fact.category,
        confidence=round(fact.confidence, 3),
        source=fact.source,
        updated=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(fact.updated_at)),
    )


class RememberResult(BaseModel):
    fact: MemoryFact = Field(description="The stored fact.")
    action: str = Field(
        description="created, or updated (a near-identical fact existed; confidence updated)."
    )


def remember(
    fact: Annotated[
        str, Field(min_length=1, max_length=2000, description="One fact, e.g. 'Prefers pytest for testing'.")
    ],
    confidence: Annotated[float, Field(ge=0, le=1, description="How sure you are, 0-1.")] = 0.8,
    category: Annotated[
        str | None, Field(max_length=60, description="Optional category, e.g. preference, project, person.")
    ] = None,
    *,
    rt: Runtime,
    call: CallContext,
) -> RememberResult:
    """Store a fact about the user or the project for later conversations (a near-identical fact
    updates its confidence instead)."""
    origin = call.origin
    is_subagent = origin.kind == "subagent"
    source = f"subagent:{origin.subagent_id or ''}" if is_subagent else f"client:{call.client_id}"
    stored, action = memory_store(rt).remember(fact, confidence, category, source=source[:120])
    return RememberResult(fact=_model(stored), action=action)


class RecallResult(BaseModel):
    memory_block: str = Field(description="The chosen facts as a <memory>...</memory> block for your prompt.")
    facts: list[ScoredFact] = Field(description="The chosen facts, best first.")
    tokens: int = Field(description="Tokens of memory_block.")
    context_used: bool = Field(description="False when there was no context: facts ordered by confidence.")
    total_facts: int = Field(description="How many facts are stored.")
    method: str = Field(
        description="How facts were ranked: lexical+dense (words and an embedding model), lexical, or confidence."
    )
    note: str = Field(description="Why embeddings were not used (empty when they were or no context).")


def recall(
    query: Annotated[
        str | None, Field(max_length=20_000, description="What the facts should be relevant to.")
    ] = None,
    messages: Annotated[
        list[Annotated[dict[str, Any], WithJsonSchema(TEXT_MESSAGE_SCHEMA)]] | None,
        Field(description="The conversation instead of a query: its last 3 turns are the context."),
    ] = None,
    max_tokens: Annotated[int, Field(ge=50, le=8000, description="Token budget of the memory block.")] = 2000,
    top_k: Annotated[int, Field(ge=1, le=100, description="At most this many facts.")] = 15,
    min_similarity: Annotated[
        float, Field(ge=0, le=1, description="Facts less similar than this to the context are left out.")
    ] = 0.1,
    *,
    rt: Runtime,
) -> RecallResult:
    """Recall stored facts relevant to a query or to the conversation's last 3 turns, by meaning and
    words (English and Chinese), weighted with confidence, within a token budget."""
    if query is not None and messages is not None:
        raise InvalidInput("Pass query or messages, not both.")
    context = query or ""
    if messages is not None:
        context = context_text(parse(messages).messages)
    store = memory_store(rt)
    has_context = bool(context.strip() and store.analyze(context))
    embedder, note = EMBEDDER.of(rt) if has_context else (None, "")
    weights = Weights.from_settings(rt.settings)
    facts = store.all_facts()
    ranked = recall_ranked(store, context if has_context else "", embedder, weights, min_similarity, facts)
    chosen, used = select(ranked, max_tokens, top_k, counter_for(None).count)
    items = [
        ScoredFact(
            **_model(s.fact).model_dump(), similarity=s.similarity, lexical=s.lexical, dense=s.dense, score=s.score
        )
        for s in chosen
    ]
    method = "confidence" if not has_context else ("lexical+dense" if embedder is not None else "lexical")
    return RecallResult(
        memory_block=format_block(chosen),
        facts=items,
        tokens=used,
        context_used=has_context,
        total_facts=len(facts),
        method=method,
        note=note,
    )


class ForgetResult(BaseModel):
    deleted: list[MemoryFact] = Field(description="The facts deleted.")


def check_forget_args(args: dict[str, Any]) -> None:
    """Exactly one of id or query (run by the dispatch point before approval, and by forget)."""
    if (args.get("id") is None) == (args.get("query") is None):
        raise InvalidInput("Pass exactly one of id or query, e.g. id=3 or query=\"the old port\".")


def forget(
    id: Annotated[
        int | None, Field(ge=1, description="Id of the fact to delete (from recall or list_memories).")
    ] = None,
    query: Annotated[
        str | None,
        Field(max_length=2000, description="Delete the stored fact(s) most similar to this text instead."),
    ] = None,
    limit: Annotated[
        int, Field(ge=1, le=20, description="With query: delete at most this many matches.")
    ] = 1,
    *,
    rt: Runtime,
) -> ForgetResult:
    """Delete a remembered fact by id, or the best matches of a query (similarity >= 0.5)."""
    check_forget_args({"id": id, "query": query})
    store = memory_store(rt)
    if id is not None:
        victims = [store.get(id)]
    else:
        terms = store.analyze(query or "")
        ranked = rank(store.all_facts(), terms, FORGET_MIN_SIMILARITY) if terms else []
        ranked.sort(key=lambda s: -s.similarity)
        victims = [s.fact for s in ranked[:limit]]
        if not victims:
            raise NotFound(
                f"No stored fact is similar enough to {query!r}. Call recall with words from it to see its id."
            )
    store.delete([f.id for f in victims])
    return ForgetResult(deleted=[_model(f) for f in victims])


class MemoryPage(BaseModel):
    facts: list[MemoryFact] = Field(description="Facts, newest first.")
    total: int = Field(description="How many facts match.")
    offset: int = Field(description="Offset of this page.")
    next_offset: int | None = Field(description="Pass as offset for the next page (null: last page).")
    note: str | None = None


def list_memories(
    offset: Annotated[int, Field(ge=0, description="Skip this many facts (paging).")] = 0,
    limit: Annotated[int, Field(ge=1, le=100, description="Facts per page.")] = 30,
    category: Annotated[str | None, Field(max_length=60, description="Only this category.")] = None,
    *,
    rt: Runtime,
) -> MemoryPage:
    """List remembered facts, newest first, one page at a time."""
    facts, total = memory_store(rt).page(offset, limit, category)
    end = offset + len(facts)
    counted = f"{total} {'fact' if total == 1 else 'facts'}" + (f" in category {category!r}" if category else "")
    return MemoryPage(
        facts=[_model(f) for f in facts], total=total, offset=offset, next_offset=next_offset(end, total),
        note=past_end_note(offset, total, counted),
    )
