"""Live search in one text file (no index): its lines ranked by the one scorer (`indexing.scoring`).

Each line that holds a query term is a one-field row and the file is the collection (idf over its
lines). A line is short, so term frequency and length do not count (k1 = 0: a term adds its idf
once); a query pair standing side by side in the line adds half the smaller idf; no window bonus.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from indexing.analyzer import analyze
from indexing.engine import TermRows
from indexing.query import Mode, parse
from indexing.scoring import RankParams, score

LINE_RANK = RankParams(k1=0.0, head_weight=0.0, bigram_weight=0.5, window_weight=0.0)


@dataclass
class LineHit:
    line: int  # 1-based
    start: int  # character offsets into the file's text
    end: int
    text: str
    score: float
    match: str = ""


def rank_lines(text: str, query: str, mode: Mode = "natural", limit: int = 5) -> list[LineHit]:
    """The lines of `text` that best match `query`, best first (`all`/`phrase`: every term/phrase required)."""
    parsed = parse(text=query, mode="natural" if mode == "fts" else mode)
    qterms = list(dict.fromkeys(parsed.all_terms()))
    if not qterms or limit <= 0:
        return []
    lines = text.split("\n")
    wanted = set(qterms)
    analysed = {i: terms for i, line in enumerate(lines) if line.strip() and wanted & set(terms := analyze(line))}
    df = Counter(t for terms in analysed.values() for t in set(terms) & wanted)
    required = wanted if mode in ("all", "phrase") else set()
    rows: list[tuple[int, list[str], list[str]]] = [
        (i, [], terms) for i, terms in analysed.items()
        if required <= set(terms) and all(_contains_seq(terms, p) for p in parsed.phrases)
    ]
    found = TermRows(rows, max(1, len(lines)), 1.0, {t: df[t] for t in qterms})
    offsets = _offsets(lines)
    return [
        LineHit(i + 1, offsets[i], offsets[i] + len(lines[i]), lines[i], round(s, 4))
        for s, i in score(found, parsed, limit, LINE_RANK)
    ]


def _offsets(lines: list[str]) -> list[int]:
    out, pos = [], 0
    for line in lines:
        out.append(pos)
        pos += len(line) + 1
    return out


def _contains_seq(terms: list[str], seq: list[str]) -> bool:
    k = len(seq)
    return any(terms[i : i + k] == seq for i in range(len(terms) - k + 1))
