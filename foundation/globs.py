"""Glob patterns without regex or recursion: linear-time segment matching."""

from __future__ import annotations

from typing import cast

MAX_PATTERN_CHARS = 512
MAX_BRACE_EXPANSIONS = 64

_Token = tuple[str, object]  # ("lit", ch) | ("any", None) | ("star", None) | ("class", (negated, items))


def expand_braces(pattern: str) -> list[str]:
    """`a.{pdf,docx}` -> [`a.pdf`, `a.docx`]; nested braces work; at most 64 results."""
    done: list[str] = []
    todo = [pattern]
    while todo:
        current = todo.pop()
        span = _first_brace_group(current)
        if span is None:
            done.append(current)
        else:
            start, end, options = span
            todo.extend(current[:start] + opt + current[end + 1 :] for opt in reversed(options))
        if len(done) + len(todo) > MAX_BRACE_EXPANSIONS:
            raise ValueError(f"the pattern expands to more than {MAX_BRACE_EXPANSIONS} alternatives")
    return list(dict.fromkeys(done))


def _first_brace_group(text: str) -> tuple[int, int, list[str]] | None:
    """The first `{...}` holding a top-level comma: (start, end, options)."""
    for start, ch in enumerate(text):
        if ch != "{":
            continue
        depth, commas = 0, [start]
        for index in range(start, len(text)):
            if text[index] == "{":
                depth += 1
            elif text[index] == "}":
                depth -= 1
                if depth == 0:
                    if len(commas) == 1:
                        break  # `{x}` without a comma stays literal
                    bounds = [*commas, index]
                    return start, index, [text[a + 1 : b] for a, b in zip(bounds, bounds[1:], strict=False)]
            elif text[index] == "," and depth == 1:
                commas.append(index)
    return None


def _tokenize(segment: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            if not tokens or tokens[-1][0] != "star":
                tokens.append(("star", None))
        elif ch == "?":
            tokens.append(("any", None))
        elif ch == "[" and (close := _class_end(segment, i)) > 0:
            tokens.append(("class", _parse_class(segment[i + 1 : close])))
            i = close
        else:
            tokens.append(("lit", ch))
        i += 1
    return tokens


def _class_end(segment: str, start: int) -> int:
    i = start + 1
    if i < len(segment) and segment[i] in "!^":
        i += 1
    if i < len(segment) and segment[i] == "]":
        i += 1
    close = segment.find("]", i)
    return close


def _parse_class(body: str) -> tuple[bool, list[tuple[str, str]]]:
    negated = body[:1] in ("!", "^")
    body = body[1:] if negated else body
    items: list[tuple[str, str]] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            items.append((body[i], body[i + 2]))
            i += 3
        else:
            items.append((body[i], body[i]))
            i += 1
    return negated, items


def _token_matches(token: _Token, ch: str) -> bool:
    kind, value = token
    if kind == "any":
        return True
    if kind == "lit":
        return value == ch
    negated, items = cast(tuple[bool, list[tuple[str, str]]], value)
    inside = any(lo <= ch <= hi for lo, hi in items)
    return inside != negated


def _segment_matches(tokens: list[_Token], name: str) -> bool:
    """Wildcard match of one path segment: two pointers, back-tracking only to the last star."""
    t = n = 0
    star_t, star_n = -1, 0
    while n < len(name):
        if t < len(tokens) and tokens[t][0] == "star":
            star_t, star_n = t, n
            t += 1
        elif t < len(tokens) and _token_matches(tokens[t], name[n]):
            t += 1
            n += 1
        elif star_t >= 0:
            t, star_n = star_t + 1, star_n + 1
            n = star_n
        else:
            return False
    return all(tok[0] == "star" for tok in tokens[t:])


class GlobPattern:
    """A compiled glob: `*`, `?`, `[abc]`, `[!a-z]`, `**` (any number of folders), `{a,b}`.

    Case-insensitive. A pattern without `/` matches file names at any depth (`*.pdf` is
    `**/*.pdf`). Matching is linear in practice (no regex, so no catastrophic patterns).
    """

    def __init__(self, pattern: str) -> None:
        if not pattern or len(pattern) > MAX_PATTERN_CHARS or "\x00" in pattern:
            raise ValueError(f"the pattern must be 1-{MAX_PATTERN_CHARS} characters without NUL bytes")
        self.pattern = pattern
        self.alternatives = [self._compile(alt) for alt in expand_braces(pattern.casefold())]

    @staticmethod
    def _compile(pattern: str) -> list[list[_Token] | None]:
        pattern = pattern.strip("/")
        if pattern.startswith("./"):
            pattern = pattern[2:]
        parts = [p for p in pattern.split("/") if p not in ("", ".")]
        if len(parts) == 1 and parts[0] != "**":
            parts = ["**", *parts]
        return [None if part == "**" else _tokenize(part) for part in parts]

    def matches(self, rel_path: str) -> bool:
        names = rel_path.casefold().split("/")
        return any(_path_matches(alt, names) for alt in self.alternatives)


def _path_matches(parts: list[list[_Token] | None], names: list[str]) -> bool:
    """Segment-level match where None (`**`) spans zero or more names. Iterative DP, O(P*N)."""
    reachable = [False] * (len(names) + 1)
    reachable[0] = True
    for part in parts:
        nxt = [False] * (len(names) + 1)
        for i, ok in enumerate(reachable):
            if not ok:
                continue
            if part is None:
                for j in range(i, len(names) + 1):
                    nxt[j] = True
                break
            if i < len(names) and _segment_matches(part, names[i]):
                nxt[i + 1] = True
        reachable = nxt
    return reachable[len(names)]
