"""optimize_context: a pure function over the internal message list.

1. clean: drop assistant messages whose tool calls are not all answered (by the `tool` messages
   right after them) and tool results whose call is gone;
2. keep every system message;
3. compress tool outputs above `tool_output_max_tokens` (JSON-aware, else a middle cut), and
   pasted blobs (fenced blocks, long runs of log/code lines) in user messages the same way;
4. the user's words first: every user message, verbatim, when they fit in the budget; under
   real pressure pasted blobs are pressed further, then sentences go by tier (small talk first,
   instructions last; `userwords.instruction_score` only ranks), the oldest first; the first
   request and the newest message stay;
5. then the newest other messages under what is left, each assistant-with-tool-calls message
   together with all its results (a chain that does not fit is skipped whole), then the oldest;
6. the open todos as one reminder at the end (an identical one already there stays in place);
7. leave `reserve_tokens` free for a summary when the caller will add one.

Cost: only what selection looks at is tokenised (user messages, then newest first until the
budget is used, then the oldest), so a cold call on a long transcript stays cheap. A unit is
counted only when its cheap lower bound says it may fit. Kept messages are always counted
exactly; the total before is exact for small inputs and otherwise an estimate, flagged in the
report (`tokens.total_tokens`).

The output is valid for the chat APIs: every kept call is answered right after it, every kept
result follows its call, order is preserved, no message is empty, and (Anthropic) the first turn
is a user turn. Kept user sentences are never changed; the newest user message alone over the
budget is cut with an explicit marker.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from context import carryover
from context.compress import compress_output, cut_middle
from context.layout import attach
from context.messages import Msg, with_content
from context.tokens import (
    TOKENS_PER_MESSAGE,
    Counter,
    lower_bound,
    message_tokens,
    total_tokens,
    upper_bound,
)
from context.userwords import WordsReport, choose_words, prose_sentences, shrink_message_blobs

SUMMARY_HEADING = "# Conversation summary"


@dataclass(frozen=True)
class Budget:
    context_window: int
    target_ratio: float = 0.6
    summary_ratio: float = 0.26
    recent_ratio: float = 0.65
    tool_output_max_tokens: int = 200
    min_messages: int = 10


@dataclass
class Report:
    tokens_before: int = 0
    tokens_after: int = 0
    messages_before: int = 0
    messages_after: int = 0
    removed: int = 0
    compressed: int = 0
    orphans_removed: int = 0
    tokens_before_estimated: bool = False
    budgets: dict[str, int] = field(default_factory=dict)
    todos_carried: int = 0
    todo_source: str = "none"
    words: WordsReport = field(default_factory=WordsReport)


def chains(msgs: list[Msg]) -> tuple[list[list[int]], set[int]]:
    """Units of the transcript as index lists (a complete tool chain is one unit) and the set of
    indexes dropped as broken (unanswered calls, results whose call is gone)."""
    units: list[list[int]] = []
    broken: set[int] = set()
    i = 0
    while i < len(msgs):
        msg = msgs[i]
        if msg.role == "tool":
            broken.add(i)
            i += 1
            continue
        if not msg.is_chain_head:
            units.append([i])
            i += 1
            continue
        wanted = {call.id for call in msg.calls}
        j, answers = i + 1, [i]
        while j < len(msgs) and msgs[j].role == "tool":
            if msgs[j].call_id in wanted:
                wanted.discard(msgs[j].call_id or "")
                answers.append(j)
            else:
                broken.add(j)
            j += 1
        if wanted:
            broken.update(answers)
        else:
            units.append(answers)
        i = j
    return units, broken


_memo: dict[tuple[str, int, str], tuple[str | None, int]] = {}
_MEMO_ENTRIES = 20_000
_MEMO_MAX_CHARS = 200_000
MAX_SKIPPED_UNITS = 100  # the recent walk gives up filling gaps after skipping this many units


def compressed_output(text: str, max_tokens: int, counter: Counter) -> tuple[str | None, int]:
    """compress_output, remembered across calls (clients resend the same transcript every turn)."""
    if len(text) > _MEMO_MAX_CHARS:
        return compress_output(text, max_tokens, counter.count)
    key = (text, max_tokens, counter.name)
    if key in _memo:
        return _memo[key]
    value = compress_output(text, max_tokens, counter.count)
    if len(_memo) >= _MEMO_ENTRIES:
        _memo.clear()
    _memo[key] = value
    return value


class Lazy:
    """Messages with tool outputs compressed and sizes counted on first look: only the messages
    selection visits are tokenised. `raw` holds the exact size of every original message counted,
    `floors` a lower bound of the original of every compressed one."""

    def __init__(self, msgs: list[Msg], counter: Counter, max_tokens: int, whole: int | None = None) -> None:
        self.msgs, self.counter, self.max_tokens = msgs, counter, max_tokens
        self.whole = whole  # the newest user message: its pasted blobs are never compressed
        self.blobs: dict[int, int] = {}  # user message -> pasted blobs compressed in it
        self._done: dict[int, tuple[Msg, int]] = {}
        self.raw: dict[int, int] = {}
        self.floors: dict[int, int] = {}

    def get(self, i: int) -> tuple[Msg, int]:
        hit = self._done.get(i)
        if hit is None:
            msg = self.msgs[i]
            small: Any = None
            floor = 0
            if msg.role == "tool":
                small, floor = compressed_output(msg.text, self.max_tokens, self.counter)
            elif msg.role == "user" and i != self.whole:
                small = self._user_blobs(i, msg)
            if small is None:
                hit = (msg, TOKENS_PER_MESSAGE + self.counter.count(self.msgs[i].full_text))
                self.raw[i] = hit[1]
            else:
                new = with_content(msg, small)
                hit = (new, message_tokens(self.counter, new))
                self.floors[i] = TOKENS_PER_MESSAGE + floor
            self._done[i] = hit
        return hit

    def _user_blobs(self, i: int, msg: Msg) -> Any:
        """The user message's content with its big pasted blobs compressed (None: nothing to do)."""
        small, done = shrink_message_blobs(msg, self.max_tokens, self.counter.count)
        if not done:
            return None
        self.blobs[i] = done
        return small.content

    def floor(self, unit: list[int]) -> int:
        """A cheap lower bound of the unit's size after compression (nothing tokenised)."""
        total = 0
        for i in unit:
            if i in self._done:
                total += self._done[i][1]
                continue
            text = self.msgs[i].full_text
            small = self.msgs[i].role != "tool" or upper_bound(text) <= self.max_tokens
            total += TOKENS_PER_MESSAGE + (lower_bound(text) if small else 1)
        return total

    def cost_within(self, unit: list[int], left: int) -> int | None:
        """The unit's size when it is at most `left`, else None (counted only when it may fit)."""
        if self.floor(unit) > left:
            return None
        cost = sum(self.get(i)[1] for i in unit)
        return cost if cost <= left else None


def optimize(
    msgs: list[Msg],
    counter: Counter,
    budget: Budget,
    reserve_tokens: int = 0,
    todos: list[carryover.Todo] | None = None,
    todo_source: str = "the todo list",
    fmt: str = "openai",
) -> tuple[list[Msg], Report]:
    """The optimised message list and a report (see the module docstring). `todos`: the open
    items to carry as one reminder (None: those of the transcript's last todo_write call)."""
    report = Report(messages_before=len(msgs))
    units, broken = chains(msgs)
    report.orphans_removed = len(broken)
    if todos is None:
        todos, todo_source = carryover.open_todos(carryover.todos_from_transcript(msgs) or []), "the transcript"
    reminder = carryover.todo_reminder(todos, todo_source)
    report.todos_carried, report.todo_source = (len(todos), todo_source) if reminder else (0, "none")
    reminder_cost = TOKENS_PER_MESSAGE + counter.count(reminder) if reminder else 0
    last = last_user(msgs)
    lazy = Lazy(msgs, counter, budget.tool_output_max_tokens, whole=last)
    keep, reduced = _select(msgs, lazy, units, budget, reserve_tokens + reminder_cost, report)
    out = [reduced.get(i) or lazy.get(i)[0] for i in sorted(keep)]
    report.compressed = sum(1 for i in keep if msgs[i].role == "tool" and lazy.get(i)[0] is not msgs[i])
    report.words.compressed_blobs(lazy.blobs, msgs, keep)
    out = keep_last_user(msgs, out, counter, max(report.budgets.get("available", 0), 1), report.words)
    out = carryover.api_shape(with_reminder(out, reminder, fmt), fmt)
    if last is not None and last not in lazy.raw and msgs[last] in out:
        lazy.raw[last] = message_tokens(counter, msgs[last])
    report.messages_after = len(out)
    report.removed = len(msgs) - len(out)
    report.tokens_after = sum(message_tokens(counter, m) for m in out)
    report.tokens_before, report.tokens_before_estimated = total_tokens(counter, msgs, lazy.raw, lazy.floors)
    return out, report


def with_reminder(out: list[Msg], reminder: str | None, fmt: str) -> list[Msg]:
    """At most one todo reminder, at the end: an identical one stays where it is (the cached
    prefix is kept); otherwise earlier ones are removed and the new one (if any) is appended."""
    positions = carryover.reminder_positions(out)
    if reminder is None:  # nothing open any more: a stale reminder would mislead
        return carryover.strip_reminders(out) if positions else out
    if len(positions) == 1 and reminder in out[positions[0]].text:
        return out
    return attach(carryover.strip_reminders(out) if positions else out, reminder, fmt)


def last_user(msgs: list[Msg]) -> int | None:
    return next((j for j in range(len(msgs) - 1, -1, -1) if msgs[j].role == "user"), None)


def _select(
    msgs: list[Msg], lazy: Lazy, units: list[list[int]], budget: Budget, reserve: int, report: Report
) -> tuple[set[int], dict[int, Msg]]:
    """The indexes kept, and user messages kept with some sentences dropped. The user's words
    are chosen first (all of them when they fit), then the newest other units, then the oldest."""
    system = [u for u in units if msgs[u[0]].role == "system"]
    others = [u for u in units if msgs[u[0]].role != "system"]
    system_tokens = sum(lazy.get(i)[1] for u in system for i in u)
    target = int(budget.context_window * budget.target_ratio)
    available = max(target - system_tokens - reserve, 0)
    keep = {u[0] for u in system}
    users = [u[0] for u in others if msgs[u[0]].role == "user"]
    if len(others) <= budget.min_messages:
        report.budgets = _budgets(budget, target, system_tokens, reserve, available, 0)
        report.words.count_all(msgs, users)
        return keep | {i for u in others for i in u}, {}
    words, reduced, words_cost = choose_words(msgs, lazy.get, lazy.counter, users, available, report.words)
    left = available - words_cost
    report.budgets = _budgets(budget, target, system_tokens, reserve, available, words_cost)
    rest = [u for u in others if msgs[u[0]].role != "user"]
    tail = _take(reversed(rest), lazy, left)
    left -= sum(lazy.get(i)[1] for i in tail)
    head = _take_prefix([u for u in rest if u[0] not in tail], lazy, left)
    return keep | words | tail | head, reduced


def _budgets(budget: Budget, target: int, system: int, reserve: int, available: int, words: int) -> dict[str, int]:
    return {
        "context_window": budget.context_window,
        "target": target,
        "system": system,
        "summary_reserve_and_reminder": reserve,
        "available": available,
        "user_words": words,
        "recent": available - words,
    }


def _take(units: Iterable[list[int]], lazy: Lazy, budget: int) -> set[int]:
    """Units (newest first) that fit; a unit that does not fit is skipped whole (up to
    MAX_SKIPPED_UNITS of them, so the work stays bounded by what is kept)."""
    chosen: set[int] = set()
    left, skipped = budget, 0
    for unit in units:
        cost = lazy.cost_within(unit, left)
        if cost is not None:
            chosen.update(unit)
            left -= cost
        elif left < 8 or skipped >= MAX_SKIPPED_UNITS:
            break
        else:
            skipped += 1
    return chosen


def _take_prefix(units: list[list[int]], lazy: Lazy, budget: int) -> set[int]:
    """The oldest units, in order, while they fit (stops at the first that does not)."""
    chosen: set[int] = set()
    left = budget
    for unit in units:
        cost = lazy.cost_within(unit, left)
        if cost is None:
            break
        chosen.update(unit)
        left -= cost
    return chosen


def keep_last_user(
    original: list[Msg], out: list[Msg], counter: Counter, limit: int, words: WordsReport | None = None
) -> list[Msg]:
    """Make sure the caller's newest user message is in `out`; when it alone is over `limit`
    tokens its text is cut in the middle with an explicit marker (its lost sentences reported)."""
    last = next((m for m in reversed(original) if m.role == "user"), None)
    if last is None or any(m.role == "user" and m.source == last.source for m in out):
        return out
    tokens = counter.count(last.text)
    msg = last if tokens <= limit else with_content(last, _cut_content(last.content, max(limit, 50), counter))
    if words is not None and msg is not last:
        kept = msg.text
        for sentence in prose_sentences(last.text):
            if sentence not in kept:
                words.drop(sentence)
    position = max((k + 1 for k, m in enumerate(out) if m.source <= last.source), default=0)
    return out[:position] + [msg] + out[position:]


def _cut_content(content: object, limit: int, counter: Counter) -> object:
    note = "; the newest user message was over the budget"
    if isinstance(content, str):
        return cut_middle(content, limit, counter.count(content), note)
    if not isinstance(content, list):
        return content
    texts = [b for b in content if isinstance(b, dict) and b.get("type") == "text"]
    share = max(limit // max(len(texts), 1), 20)
    return [
        {**b, "text": cut_middle(str(b.get("text", "")), share, counter.count(str(b.get("text", ""))), note)}
        if b in texts
        else b
        for b in content
    ]
