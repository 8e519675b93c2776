"""Todo lists kept in the database so they survive restarts, client compaction and reconnects.

`TodoStore.write` replaces a whole list (the TodoWrite semantics clients know) inside one write
transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: SERIALIZABLE, retried), so server processes
writing the same list never leave it half-written nor lose a version. Plain library code: no MCP imports.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from foundation.errors import InvalidInput, LimitExceeded
from foundation.storage import Conn, Database, Schema, Table

Status = Literal["pending", "in_progress", "completed"]
Priority = Literal["low", "medium", "high"]
STATUSES: tuple[str, ...] = ("pending", "in_progress", "completed")
PRIORITIES: tuple[str, ...] = ("low", "medium", "high")
MAX_ITEMS = 200
MAX_CONTENT_CHARS = 2000
LIST_ID_RE = re.compile(r"^[A-Za-z0-9._@-]{1,120}$")
ITEM_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

_ITEM_COLUMNS = ("list_id", "position", "id", "content", "status", "priority", "active_form")
SCHEMA = Schema(
    name="todos",
    sqlite_file="todos.sqlite3",
    sqlite=(
        """
        CREATE TABLE todo_lists (
            list_id TEXT PRIMARY KEY,
            version INTEGER NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE todo_items (
            list_id TEXT NOT NULL REFERENCES todo_lists(list_id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            id TEXT NOT NULL,
            content TEXT NOT NULL,
            status TEXT NOT NULL,
            priority TEXT NOT NULL,
            active_form TEXT,
            PRIMARY KEY (list_id, position)
        );
        """,
    ),
    postgres=(
        """
        CREATE TABLE todo_lists (
            list_id text PRIMARY KEY,
            version bigint NOT NULL,
            updated_at double precision NOT NULL
        );
        CREATE TABLE todo_items (
            list_id text NOT NULL REFERENCES todo_lists(list_id) ON DELETE CASCADE,
            position integer NOT NULL,
            id text NOT NULL,
            content text NOT NULL,
            status text NOT NULL,
            priority text NOT NULL,
            active_form text,
            PRIMARY KEY (list_id, position)
        );
        """,
    ),
    tables=(Table("todo_lists", ("list_id", "version", "updated_at"), ("list_id",)),
            Table("todo_items", _ITEM_COLUMNS, ("list_id", "position"))),
    sqlite_pragmas=("foreign_keys=ON",),
)


class TodoItem(BaseModel):
    """One stored todo item."""

    id: str = Field(description="Stable 8-character id (kept across writes when you pass it back).")
    content: str = Field(description="What to do.")
    status: Status = Field(description="pending, in_progress or completed.")
    priority: Priority = Field(default="medium", description="low, medium or high.")
    active_form: str | None = Field(default=None, description="Present-continuous form, e.g. 'Running tests'.")


class TodoList(BaseModel):
    list_id: str = Field(description="The list's id.")
    items: list[TodoItem] = Field(description="The items, in order.")
    summary: str = Field(description="Counts by status, e.g. '3 pending, 1 in progress, 2 completed'.")
    version: int = Field(description="Increases by one with every write (0: never written).")
    updated_at: str | None = Field(description="Last write, ISO 8601 UTC (null: never written).")


def check_list_id(list_id: str) -> str:
    if not LIST_ID_RE.match(list_id):
        raise InvalidInput(
            f"Invalid list_id {list_id!r}: use 1-120 letters, digits or . _ @ - (or omit it for the default list)."
        )
    return list_id


def summarize(items: Iterable[TodoItem]) -> str:
    counts = dict.fromkeys(STATUSES, 0)
    for item in items:
        counts[item.status] += 1
    return f"{counts['pending']} pending, {counts['in_progress']} in progress, {counts['completed']} completed"


def _label(index: int, raw: Mapping[str, Any]) -> str:
    content = str(raw.get("content") or "").strip()
    return f"item {index + 1} ({content[:60]!r})" if content else f"item {index + 1}"


def _text(raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{key} must be a string, got {type(value).__name__}.")
    if "\x00" in value:
        raise InvalidInput(f"{key} contains a NUL character (\\x00); remove it.")
    return value.strip()


def _normalize_one(index: int, raw: Mapping[str, Any], seen_ids: set[str]) -> TodoItem:
    label = _label(index, raw)
    content = _text(raw, "content")
    if not content:
        raise InvalidInput(f"Todo {label} has empty content. Every item needs a short description.")
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidInput(f"Todo {label} is {len(content)} characters; keep content under {MAX_CONTENT_CHARS}.")
    status = _text(raw, "status")
    if status not in STATUSES:
        raise InvalidInput(f"Todo {label} has unknown status {status!r}. Use one of: {', '.join(STATUSES)}.")
    priority = _text(raw, "priority") or "medium"
    if priority not in PRIORITIES:
        raise InvalidInput(f"Todo {label} has unknown priority {priority!r}. Use one of: {', '.join(PRIORITIES)}.")
    item_id = _text(raw, "id") or _new_id(seen_ids)
    if not ITEM_ID_RE.match(item_id):
        raise InvalidInput(f"Todo {label} has invalid id {item_id!r}: use 1-64 letters, digits, . _ or -.")
    if item_id in seen_ids:
        raise InvalidInput(f"Todo {label} repeats id {item_id!r}. Ids must be unique in a list.")
    seen_ids.add(item_id)
    return TodoItem.model_validate({"id": item_id, "content": content, "status": status, "priority": priority,
                                    "active_form": _text(raw, "active_form") or None})


def _new_id(taken: set[str]) -> str:
    while True:
        candidate = secrets.token_hex(4)
        if candidate not in taken:
            return candidate


def normalize_items(raw_items: Iterable[Mapping[str, Any] | BaseModel]) -> list[TodoItem]:
    """Validate a whole new list; raises InvalidInput naming the offending items."""
    raws = [r.model_dump() if isinstance(r, BaseModel) else dict(r) for r in raw_items]
    if len(raws) > MAX_ITEMS:
        raise LimitExceeded(f"A todo list holds at most {MAX_ITEMS} items; got {len(raws)}. Split the work.")
    # Ids the caller passed are reserved first so a generated id never collides with a later one.
    given = {str(r["id"]).strip() for r in raws if isinstance(r.get("id"), str) and r["id"].strip()}
    seen: set[str] = set()
    items = []
    for index, raw in enumerate(raws):
        if not (isinstance(raw.get("id"), str) and raw["id"].strip()):
            raw["id"] = _new_id(given | seen)
        items.append(_normalize_one(index, raw, seen))
    active = [f"{i + 1} ({item.content[:60]!r})" for i, item in enumerate(items) if item.status == "in_progress"]
    if len(active) > 1:
        raise InvalidInput(
            f"At most one item may be in_progress; items {', '.join(active)} are. "
            "Mark the others pending or completed."
        )
    return items


class TodoStore:
    """Todo lists in the deployment's database (SQLite file todos.sqlite3, or PostgreSQL)."""

    def __init__(self, database: Database) -> None:
        self._db = database.open(SCHEMA)

    def write(self, list_id: str, items: Iterable[Mapping[str, Any] | BaseModel]) -> TodoList:
        """Replace the whole list atomically (read-modify-write of its version, in one transaction)."""
        check_list_id(list_id)
        normalized = normalize_items(items)
        rows = [(list_id, pos, i.id, i.content, i.status, i.priority, i.active_form) for pos, i in enumerate(normalized)]

        def replace(conn: Conn) -> None:
            version = (conn.scalar("SELECT version FROM todo_lists WHERE list_id=?", (list_id,)) or 0) + 1
            conn.execute(
                "INSERT INTO todo_lists(list_id, version, updated_at) VALUES(?,?,?) "
                "ON CONFLICT(list_id) DO UPDATE SET version=excluded.version, updated_at=excluded.updated_at",
                (list_id, version, time.time()),
            )
            conn.execute("DELETE FROM todo_items WHERE list_id=?", (list_id,))
            conn.executemany(
                "INSERT INTO todo_items(list_id, position, id, content, status, priority, active_form) "
                "VALUES(?,?,?,?,?,?,?)", rows)

        self._db.write(replace)
        return self.read(list_id)

    def read(self, list_id: str) -> TodoList:
        """The list as stored (an empty list, version 0, when it was never written)."""
        check_list_id(list_id)
        with self._db.read() as conn:  # one consistent snapshot of both tables
            head = conn.one("SELECT version, updated_at FROM todo_lists WHERE list_id=?", (list_id,))
            rows = conn.all(
                "SELECT id, content, status, priority, active_form FROM todo_items WHERE list_id=? ORDER BY position",
                (list_id,))
        items = [TodoItem(id=r[0], content=r[1], status=r[2], priority=r[3], active_form=r[4]) for r in rows]
        version, updated = (int(head[0]), _iso(head[1])) if head else (0, None)
        return TodoList(list_id=list_id, items=items, summary=summarize(items), version=version, updated_at=updated)

    def open_items(self, list_id: str) -> list[TodoItem]:
        """Items not yet completed (in progress first, then pending, in list order)."""
        return open_items_of(self.read(list_id))

    def reminder_text(self, list_id: str) -> str | None:
        """A short reminder of unfinished items, or None when nothing is open."""
        return reminder_of(self.read(list_id))

    def close(self) -> None:
        self._db.close()


def open_items_of(todo: TodoList) -> list[TodoItem]:
    """The list's items not yet completed (in progress first, then pending, in list order)."""
    return sorted((i for i in todo.items if i.status != "completed"), key=lambda i: i.status != "in_progress")


def reminder_of(todo: TodoList) -> str | None:
    """A short reminder of the list's unfinished items, or None when nothing is open."""
    open_items = open_items_of(todo)
    if not open_items:
        return None
    lines = [f"Todo list {todo.list_id!r} ({todo.summary}). Unfinished:"]
    for item in open_items[:20]:
        text = item.active_form if item.status == "in_progress" and item.active_form else item.content
        lines.append(f"- [{item.status}] {text[:200]} (id {item.id})")
    if len(open_items) > 20:
        lines.append(f"- … and {len(open_items) - 20} more (todo_read shows all)")
    lines.append("Update it with todo_write as you work.")
    return "\n".join(lines)


def _iso(timestamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))
