"""From user text to an FTS5 MATCH expression over the analysed-terms columns.

Modes:
- `natural` (default): quoted phrases are kept as phrases (and required); everything else is
  analysed like the index (stop/question words dropped, stems, jieba words) and OR'ed.
- `all`: every term and phrase is required.
- `phrase`: the whole text is one phrase.
- `fts`: raw FTS5 syntax (AND/OR/NOT, NEAR(...), parentheses, "phrases", prefix*); each word
  or phrase in it is analysed like the index. Syntax errors raise QuerySyntaxError with an example.

Every term is emitted as a double-quoted FTS5 string made of analyser output only (letters and
digits), so no user text can inject FTS syntax in the escaped modes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from foundation.errors import QuerySyntaxError
from indexing.analyzer import analyze

Mode = Literal["natural", "all", "phrase", "fts"]

_PHRASE = re.compile(r'"([^"]*)"')
_FTS_TOKEN = re.compile(r'"(?:[^"]|"")*"|\(|\)|,|\*|\^|[^\s()",*^]+')
_OPERATORS = frozenset({"AND", "OR", "NOT"})


@dataclass
class ParsedQuery:
    """The analysed query: loose terms (in order, may repeat) and required phrases."""

    terms: list[str] = field(default_factory=list)
    phrases: list[list[str]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.terms and not self.phrases

    def all_terms(self) -> list[str]:
        """Every term, phrases included, in query order (for ranking)."""
        return [*self.terms, *(t for p in self.phrases for t in p)]


@dataclass(frozen=True)
class Query:
    """A query parsed once: what the engines and the scorer read."""

    text: str
    mode: Mode
    parsed: ParsedQuery
    match: str | None = None  # `fts` mode: the raw FTS5 expression in the index's analysis


def plan(text: str, mode: Mode = "natural") -> Query:
    """Parse user text once for every later step (in `fts` mode, the translated expression's terms rank)."""
    if mode != "fts":
        return Query(text, mode, parse(text, mode))
    match = translate_fts(text)
    terms = [t for t in match.replace('"', " ").split() if t not in _OPERATORS]
    return Query(text, mode, ParsedQuery(terms=terms), match)


def parse(text: str, mode: Mode = "natural") -> ParsedQuery:
    """Split user text into analysed terms and phrases (not for `fts` mode)."""
    if mode == "phrase":
        terms = analyze(text)
        return ParsedQuery(phrases=[terms] if len(terms) > 1 else [], terms=terms if len(terms) == 1 else [])
    parsed = ParsedQuery()
    rest = text
    if text.count('"') >= 2:
        for match in _PHRASE.finditer(text):
            words = analyze(match.group(1))
            if len(words) > 1:
                parsed.phrases.append(words)
            else:
                parsed.terms.extend(words)
        rest = _PHRASE.sub(" ", text)
    parsed.terms.extend(analyze(rest))
    return parsed


def quote(terms: list[str]) -> str:
    """An FTS5 string for a term or phrase of analyser output (no quotes can occur inside)."""
    return '"' + " ".join(t.replace('"', "") for t in terms) + '"'


def to_match(parsed: ParsedQuery, mode: Mode = "natural") -> str | None:
    """The MATCH expression for a parsed query; None when nothing is left to search for."""
    if parsed.empty:
        return None
    loose = list(dict.fromkeys(parsed.terms))
    phrases = [quote(p) for p in parsed.phrases]
    if mode in ("all", "phrase"):
        return " AND ".join([*phrases, *(quote([t]) for t in loose)])
    ored = " OR ".join(quote([t]) for t in loose)
    if not phrases:
        return ored
    required = " AND ".join(phrases)
    if not ored:
        return required
    return f"{required} AND ({ored} OR {' OR '.join(phrases)})"  # loose terms rank, phrases filter


def translate_fts(raw: str) -> str:
    """Rewrite raw FTS5 syntax so that its words and phrases use the index's analysis."""
    out: list[str] = []
    for token in _FTS_TOKEN.findall(raw):
        if token in _OPERATORS or token == "NEAR" or token in "()*^,":
            out.append(token)
        elif token.startswith('"'):
            out.append(quote(analyze(token[1:-1].replace('""', '"'))))
        elif re.fullmatch(r"\d+", token) and out and out[-1] == ",":
            out.append(token)  # NEAR(... , 5)
        else:
            terms = analyze(token)
            out.append(quote(terms) if terms else '""')
    text = " ".join(out)
    return re.sub(r'" \*', '"*', text).replace("NEAR (", "NEAR(")


def fts_error(raw: str, reason: str) -> QuerySyntaxError:
    words = [w for w in re.findall(r"[^\W_]+", raw) if w.upper() not in _OPERATORS | {"NEAR"}][:3] or ["revenue"]
    example = " AND ".join(f'"{w}"' for w in words)
    return QuerySyntaxError(
        f"Invalid FTS5 query ({reason}). Quote words and phrases and use AND/OR/NOT in capitals, "
        f"e.g. {example} or NEAR(\"{words[0]}\" \"growth\", 5); or use mode=\"natural\", which accepts any text."
    )
