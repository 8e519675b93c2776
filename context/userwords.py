"""The user's own words: sentences, pasted blobs, and how much each sentence instructs.

Everything the user typed is kept verbatim by optimize and compact as long as it fits; this
module splits it into sentences and *pasted blobs* (fenced blocks, long runs of log/code lines),
which may be compressed like a tool output with a note. `instruction_score` only ranks what to
drop first under real pressure (small talk, oldest first); it never decides alone what is kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from context.compress import shorten
from context.messages import Msg, with_content, with_text_edited
from context.tokens import TOKENS_PER_MESSAGE, Counter, message_tokens

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|(?<=[。！？])|\n+")  # not at ; or ；: a clause is not a sentence
_FENCE = re.compile(r"```[^\n]*\n.*?(?:```|\Z)|<system-reminder>.*?</system-reminder>", re.S)
BLOB_MIN_LINES = 12  # this many consecutive non-empty lines pasted without a fence are a blob
BLOB_NOTE = "; pasted text compressed, the user's prose around it is verbatim"
MAX_REPORTED = 20
REPORT_SENTENCE_CHARS = 160


def sentences(text: str) -> list[str]:
    """The sentences of prose, stripped, in order (blank pieces dropped)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def blobs(text: str) -> list[tuple[int, int]]:
    """(start, end) of pasted blobs in `text`: fenced blocks and long runs of lines."""
    spans = [(m.start(), m.end()) for m in _FENCE.finditer(text)]
    if len(text) < 400 or text.count("\n") < BLOB_MIN_LINES:
        return spans
    run_start, run_lines, pos = None, 0, 0
    for line in text.splitlines(keepends=True):
        inside = any(a <= pos < b for a, b in spans)
        if line.strip() and not inside:
            run_start = pos if run_start is None else run_start
            run_lines += 1
        else:
            if run_start is not None and run_lines >= BLOB_MIN_LINES:
                spans.append((run_start, pos))
            run_start, run_lines = None, 0
        pos += len(line)
    if run_start is not None and run_lines >= BLOB_MIN_LINES:
        spans.append((run_start, pos))
    return sorted(spans)


def pasted(text: str) -> int:
    """How many pasted blobs `text` has (reminder blocks are not the user's pastes)."""
    return sum(not text.startswith("<system-reminder>", start) for start, _ in blobs(text))


def prose(text: str) -> str:
    """`text` without its pasted blobs."""
    out, last = [], 0
    for start, end in blobs(text):
        out.append(text[last:start])
        last = end
    out.append(text[last:])
    return "\n".join(p for p in out if p.strip())


_sentence_cache: dict[str, list[str]] = {}
_CACHE_LIMIT = 50_000


def prose_sentences(text: str) -> list[str]:
    """The sentences of `text` outside pasted blobs (cached: clients resend the same transcript)."""
    hit = _sentence_cache.get(text)
    if hit is None:
        if len(_sentence_cache) >= _CACHE_LIMIT:
            _sentence_cache.clear()
        hit = _sentence_cache[text] = sentences(prose(text))
    return hit


def shrink_blobs(text: str, max_tokens: int, count: Callable[[str], int]) -> tuple[str, int]:
    """`text` with each pasted blob over `max_tokens` cut in the middle (with a note); the prose is
    untouched. Returns (text, blobs compressed)."""
    spans = blobs(text)
    if not spans:
        return text, 0
    out, last, done = [], 0, 0
    for start, end in spans:
        out.append(text[last:start])
        if text.startswith("<system-reminder>", start):  # ours, not a paste: left whole
            out.append(text[start:end])
            last = end
            continue
        small = shorten(text[start:end], max_tokens, count, BLOB_NOTE)
        done += small != text[start:end]
        out.append(small)
        last = end
    out.append(text[last:])
    return "".join(out), done


# ---------------------------------------------------------------- instruction ranking

_EN_STRONG = re.compile(
    r"\b(must|mustn't|never|always|only|don't|do not|doesn't|no|not|should|shouldn't|need|needs|"
    r"make sure|ensure|avoid|prefer|rather|instead|keep|stick|stay|stays|use|uses|reply|answer|write|"
    r"put|ask|goes|go|limit|quota|max|maximum|minimum|at most|at least|every|each|from now on|"
    r"from here on|anything|nothing|can't|cannot|won't|is|are|has|have)\b",
    re.I,
)
_EN_SMALL_TALK = re.compile(
    r"^(thanks|thank you|thx|ok|okay|cool|great|nice|good|hmm+|hm|wow|sorry|lol|yes|yeah|yep|no problem|"
    r"never mind|looks good|sounds good|let me think|interesting|alright|sure|perfect)\b",
    re.I,
)
_ZH_STRONG = re.compile(r"请|要|不要|别|必须|一律|只|都|不能|不得|应该|用|写|放|保留|负责|不超过|最多|至少|以.*为准|不")
_ZH_SMALL_TALK = re.compile(r"^(好的|好|谢谢|嗯|哦|辛苦|不错|可以|行|对|是的|没事|算了)")
_SPECIFIC = re.compile(r"\d|[A-Z][a-z]+|[/_.]\w|\"|'|“|《")


def instruction_score(sentence: str) -> float:
    """0..1: how much `sentence` reads like an instruction, constraint or fact to keep (a ranking
    signal only). Questions and small talk score low; specific statements high."""
    text = sentence.strip()
    if not text:
        return 0.0
    zh = any("\u4e00" <= ch <= "\u9fff" for ch in text)
    small = _ZH_SMALL_TALK if zh else _EN_SMALL_TALK
    words = len(text) / 2 if zh else len(text.split())
    score = 0.35
    if small.match(text) and words <= 6:
        score -= 0.3
    if (_ZH_STRONG if zh else _EN_STRONG).search(text):
        score += 0.3
    if _SPECIFIC.search(text[1:]):
        score += 0.15
    if text.endswith(("?", "？")):
        score -= 0.2
    if words < 3:
        score -= 0.15
    return max(0.0, min(1.0, score))


SMALL_TALK_BELOW = 0.3
INSTRUCTION_FROM = 0.6


def tier(sentence: str) -> int:
    """0 small talk, 1 other, 2 instruction: the order in which sentences are dropped."""
    score = instruction_score(sentence)
    return 0 if score < SMALL_TALK_BELOW else (2 if score >= INSTRUCTION_FROM else 1)


# ---------------------------------------------------------------- what a tool reports


@dataclass
class WordsReport:
    """Which of the user's sentences are still in the output verbatim, which were dropped, and
    which messages had pasted blobs compressed (bounded samples)."""

    sentences: int = 0
    dropped: int = 0
    blobs_compressed: int = 0
    dropped_sentences: list[str] = field(default_factory=list)
    compressed_in: list[str] = field(default_factory=list)

    def drop(self, sentence: str) -> None:
        self.dropped += 1
        if len(self.dropped_sentences) < MAX_REPORTED:
            self.dropped_sentences.append(_short(sentence))

    def compressed(self, text: str, count: int) -> None:
        self.blobs_compressed += count
        if count and len(self.compressed_in) < MAX_REPORTED:
            self.compressed_in.append(_short(prose(text) or text))

    def count_all(self, msgs: list[Msg], users: list[int]) -> None:
        self.sentences += sum(len(prose_sentences(msgs[i].text)) for i in users)

    def compressed_blobs(self, blobs: dict[int, int], msgs: list[Msg], keep: set[int]) -> None:
        for i in sorted(blobs):
            if i in keep:
                self.compressed(msgs[i].text, blobs[i])

    def as_dict(self) -> dict[str, Any]:
        return {"sentences": self.sentences, "kept": self.sentences - self.dropped, **self.__dict__}


# ---------------------------------------------------------------- choosing under a budget

Sized = Callable[[int], tuple[Msg, int]]


def choose_words(
    msgs: list[Msg], get: Sized, counter: Counter, users: list[int], budget: int, words: WordsReport
) -> tuple[set[int], dict[int, Msg], int]:
    """The user messages kept (all of them when they fit in `budget` tokens), those kept with some
    sentences dropped, and their cost. Under pressure sentences go by tier (small talk first), the
    oldest first; the first request and the newest message are never cut here (the newest one is
    left out when it alone is over: the caller cuts it with a marker)."""
    words.count_all(msgs, users)
    sized = {i: get(i) for i in users}
    if users and sized[users[-1]][1] > budget:
        del sized[users[-1]]
    total = sum(cost for _, cost in sized.values())
    if total <= budget:
        return set(sized), {}, total
    protected = {users[0], users[-1]}
    shrunk = _press_blobs(sized, protected, counter)
    sized.update(shrunk)
    total = sum(cost for _, cost in sized.values())
    if total <= budget:
        return set(sized), {i: m for i, (m, _) in shrunk.items()}, total
    texts = {i: prose_sentences(m.text) for i, (m, _) in sized.items() if i not in protected}
    order = sorted(((tier(t), i, t) for i, ts in texts.items() for t in ts), key=lambda x: (x[0], x[1]))
    over, dropped = total - budget, dict[int, list[str]]()
    for _, i, sentence in order:
        if over <= 0:
            break
        dropped.setdefault(i, []).append(sentence)
        over -= counter.count(sentence) + (TOKENS_PER_MESSAGE if len(dropped[i]) == len(texts[i]) else 0)
    kept, reduced, cost = _rebuild(sized, dropped, counter, budget, protected, words)
    return kept, {**{i: m for i, (m, _) in shrunk.items() if i in kept}, **reduced}, cost


PRESSED_BLOB_TOKENS = 40


def _press_blobs(
    sized: dict[int, tuple[Msg, int]], protected: set[int], counter: Counter
) -> dict[int, tuple[Msg, int]]:
    """Under pressure, pasted blobs go before any sentence: cut to PRESSED_BLOB_TOKENS each."""
    out = {}
    for i, (msg, _) in sized.items():
        if i in protected:
            continue
        smaller, done = shrink_message_blobs(msg, PRESSED_BLOB_TOKENS, counter.count)
        if done:
            out[i] = (smaller, message_tokens(counter, smaller))
    return out


def shrink_message_blobs(msg: Msg, max_tokens: int, count: Callable[[str], int]) -> tuple[Msg, int]:
    """`msg` with its pasted blobs over `max_tokens` compressed, and how many were."""
    content = msg.content
    if isinstance(content, str):
        small, done = shrink_blobs(content, max_tokens, count)
        return (with_content(msg, small) if done else msg), done
    if not isinstance(content, list):
        return msg, 0
    blocks, done = [], 0
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            text, n = shrink_blobs(str(block.get("text", "")), max_tokens, count)
            block, done = ({**block, "text": text} if n else block), done + n
        blocks.append(block)
    return (with_content(msg, blocks) if done else msg), done


def _rebuild(
    sized: dict[int, tuple[Msg, int]],
    dropped: dict[int, list[str]],
    counter: Counter,
    budget: int,
    protected: set[int],
    words: WordsReport,
) -> tuple[set[int], dict[int, Msg], int]:
    reduced: dict[int, Msg] = {}
    kept = set(sized)
    for i, gone in dropped.items():
        for sentence in gone:
            words.drop(sentence)
        smaller = without_sentences(sized[i][0], gone)
        if smaller is None:
            kept.discard(i)
        else:
            reduced[i] = smaller
    costs = {i: message_tokens(counter, reduced[i]) if i in reduced else sized[i][1] for i in kept}
    total = sum(costs.values())
    def rank(i: int) -> tuple[int, int]:  # lowest tier first, then the oldest
        left = prose_sentences((reduced.get(i) or sized[i][0]).text)
        return max((tier(t) for t in left), default=0), i

    for i in sorted(kept - protected, key=rank):  # still over (framing, blobs): whole messages
        if total <= budget:
            break
        kept.discard(i)
        total -= costs[i]
        for sentence in prose_sentences((reduced.get(i) or sized[i][0]).text):
            words.drop(sentence)
    return kept, {i: m for i, m in reduced.items() if i in kept}, total


def without_sentences(msg: Msg, gone: list[str]) -> Msg | None:
    """`msg` without the given sentences (None when nothing is left)."""

    def cut(text: str) -> str:
        for sentence in gone:
            text = text.replace(sentence, "", 1)
        return re.sub(r"[ \t]{2,}", " ", text).strip()

    return with_text_edited(msg, lambda text: cut(text) or None)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REPORT_SENTENCE_CHARS else text[: REPORT_SENTENCE_CHARS - 1] + "…"
