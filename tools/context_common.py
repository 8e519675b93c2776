"""What the context tools share: their parameter specs, result pages and the page cache.

Large message lists are returned in pages: the result of a call is cached briefly, so asking
again with the same arguments and `page_offset` returns the next page without recomputing (or
re-calling the LLM).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, WithJsonSchema
from pydantic_core import to_jsonable_python

from context.carryover import Todo, open_todos, todos_from_transcript
from context.messages import Msg, Transcript, parse
from context.store import ContextStore
from context.todos import TodoList
from context.tokens import TOKENS_REPLY_PRIMING, Counter, message_tokens
from foundation.bounding import dumps, estimate_tokens, next_offset
from foundation.errors import InvalidInput
from foundation.schemas import MESSAGE_SCHEMA, TEXT_BLOCK_SCHEMA
from tools.runtime import Runtime, Service
from tools.todos import resolve_list_id, todo_store

Message = Annotated[dict[str, Any], WithJsonSchema(MESSAGE_SCHEMA)]
MessagesParam = Annotated[
    list[Message],
    Field(
        description="The conversation, OpenAI Chat format (role system/user/assistant/tool, tool_calls, "
        "tool_call_id) or Anthropic Messages format (user/assistant with text/tool_use/tool_result blocks). "
        "Results come back in the same format."
    ),
]
SystemParam = Annotated[
    str | list[Annotated[dict[str, Any], WithJsonSchema(TEXT_BLOCK_SCHEMA)]] | None,
    Field(description="Anthropic format only: the separate system prompt (string or text blocks)."),
]
FormatParam = Annotated[
    Literal["auto", "openai", "anthropic"],
    Field(description="Message format; auto detects it from the messages."),
]
WindowParam = Annotated[
    int, Field(ge=1000, le=10_000_000, description="The model's context window in tokens, e.g. 128000.")
]
ModelParam = Annotated[
    str | None,
    Field(description="Model name to pick the tokenizer, e.g. gpt-4o. Non-OpenAI models give an estimate."),
]
PageParam = Annotated[
    int,
    Field(
        ge=0, description="Return messages from this index (use next_offset of a previous identical call)."
    ),
]
ConversationParam = Annotated[
    str | None,
    Field(
        max_length=200, description="Your conversation's id: keeps summaries / reminder state across calls."
    ),
]

ESTIMATED = (
    "True when tokens_before is an estimate: large inputs are not tokenised in full (dropped messages "
    "are sized from an exact count of a sample). tokens_after is always exact."
)


class SizeReport(BaseModel):
    """What optimize_context and compact_context both report about the size of the conversation."""

    tokens_before: int = Field(description="Tokens of the input (see tokens_before_estimated).")
    tokens_before_estimated: bool = Field(description=ESTIMATED)
    tokens_after: int = Field(description="Tokens of the output.")
    messages_before: int = Field(description="Messages in the input.")
    messages_after: int = Field(description="Messages in the output.")


USER_WORDS = (
    "The user's own sentences: how many the input has, how many are kept verbatim, how many were "
    "dropped (with up to 20 of them), and pasted blobs (logs, files) compressed in user messages."
)
TOKENIZER_EXACT = (
    "True when the model's own tokenizer was used; false: counted with the nearest encoding (an estimate)."
)
TodoListParam = Annotated[
    str | None, Field(description="Todo list whose open items are carried (default: this workspace's list).")
]


class MessagesPage(BaseModel):
    format: str = Field(description="openai or anthropic (the format of the input).")
    messages: list[dict[str, Any]] = Field(description="The resulting messages (this page), in your format.")
    system: Any = Field(default=None, description="Anthropic format: the system prompt to send (else null).")
    total_messages: int = Field(description="How many messages the full result has.")
    offset: int = Field(description="Index of the first message in this page.")
    next_offset: int | None = Field(
        description="Call again with page_offset=this for the rest (null: complete)."
    )


_CACHE_ENTRIES = 8


class PageCache:
    """The last few full results per runtime, so page_offset > 0 reuses them (no recompute, no LLM)."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, tuple[Any, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[Any, ...] | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: str, value: tuple[Any, ...]) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > _CACHE_ENTRIES:
                self._items.popitem(last=False)


def cache_key(name: str, **parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return name + ":" + hashlib.sha256(text.encode()).hexdigest()


def paged(
    rt: Runtime, name: str, key_parts: dict[str, Any], offset: int, compute: Callable[[], tuple[Any, ...]]
) -> tuple[MessagesPage, Any]:
    """(page, report) of a (format, messages, system, report) result. The first page is always
    computed; results that need more pages are cached (here and in the context store, so another
    server process on the same database serves the same result) and later pages reuse them."""
    cache = _PAGE_CACHE.of(rt)
    key = cache_key(name, **key_parts) if offset > 0 else None
    hit = cache.get(key) if key else None
    if hit is None and key:  # computed by another server process sharing the database?
        shared = context_store(rt).get_page(key)
        hit = tuple(shared) if shared is not None else None
    fresh = hit is None
    if hit is None:
        hit = compute()
    fmt, rendered, system_out, data = hit
    page = page_of(rt, fmt, rendered, system_out, offset)
    if page.next_offset is not None:
        key = key or cache_key(name, **key_parts)
        cache.put(key, hit)
        if fresh:  # the later pages must show this very result, whichever process serves them
            context_store(rt).put_page(key, to_jsonable_python(list(hit)))
    return page, data


def page_of(rt: Runtime, fmt: str, messages: list[dict[str, Any]], system: Any, offset: int) -> MessagesPage:
    if offset > len(messages):
        raise InvalidInput(f"page_offset {offset} is past the end ({len(messages)} messages).")
    budget = int(rt.settings.max_result_tokens * 0.7) - (estimate_tokens(dumps(system)) if system else 0)
    end, used = offset, 0
    while end < len(messages):
        cost = estimate_tokens(dumps(messages[end])) + 2
        if end > offset and used + cost > budget:
            break
        used += cost
        end += 1
    return MessagesPage(
        format=fmt,
        messages=messages[offset:end],
        system=system if offset == 0 else None,
        total_messages=len(messages),
        offset=offset,
        next_offset=next_offset(end, len(messages)),
    )


def parse_transcript(messages: list[dict[str, Any]], system: Any, fmt: str) -> Transcript:
    return parse(messages, system, fmt)  # type: ignore[arg-type]


def total_tokens(counter: Counter, msgs: list[Msg]) -> int:
    return sum(message_tokens(counter, m) for m in msgs) + (TOKENS_REPLY_PRIMING if msgs else 0)


_CONTEXT_STORE: Service[ContextStore] = Service(lambda rt: ContextStore(rt.database))


def context_store(rt: Runtime) -> ContextStore:
    return _CONTEXT_STORE.of(rt)


def stored_todos(rt: Runtime, list_id: str | None, client_id: str) -> TodoList | None:
    """The todo list from the todo store, or None when nothing was ever stored under it."""
    stored = todo_store(rt).read(resolve_list_id(rt, list_id, client_id))
    return stored if stored.version > 0 else None


def todos_for(rt: Runtime, list_id: str | None, client_id: str, msgs: list[Msg]) -> tuple[list[Todo], str]:
    """Open todo items: the todo store's list when it was ever written, else the transcript's
    last todo_write call; and where they came from."""
    stored = stored_todos(rt, list_id, client_id)
    if stored is not None:
        return open_todos([Todo(i.content, i.status) for i in stored.items]), f"todo list {stored.list_id!r}"
    found = todos_from_transcript(msgs)
    return (open_todos(found), "the transcript's last todo_write call") if found else ([], "none")


def warm_up_tokens(rt: Runtime) -> None:
    """Load the token encoding once at start-up (and look for o200k_base in <data dir>/encodings)."""
    from context.tokens import add_encoding_dir, warm_up

    add_encoding_dir(rt.data_dir / "encodings")
    warm_up()


_PAGE_CACHE: Service[PageCache] = Service(lambda rt: PageCache())
