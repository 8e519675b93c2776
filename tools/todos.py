"""Todo tools: a persistent todo list per workspace and client (todo_write / todo_read)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any

from pydantic import BaseModel, Field

from context.todos import PRIORITIES, STATUSES, TodoList, TodoStore, check_list_id
from foundation.settings import Settings
from tools.runtime import CallContext, Runtime, Service

DEFAULT_LIST = "default"


class TodoInput(BaseModel):
    content: str = Field(description="What to do.")
    status: str = Field(
        description="pending, in_progress or completed. At most one item may be in_progress.",
        json_schema_extra={"enum": list(STATUSES)},
    )
    priority: str | None = Field(
        default=None, description="Default medium.", json_schema_extra={"enum": list(PRIORITIES)}
    )
    active_form: str | None = Field(default=None, description="Present-continuous text, e.g. 'Writing tests'.")
    id: str | None = Field(default=None, description="The item's id from a previous result; omit for new items.")


_TODO_STORE: Service[TodoStore] = Service(lambda rt: TodoStore(rt.database))


def todo_store(rt: Runtime) -> TodoStore:
    return _TODO_STORE.of(rt)


def _slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:limit] or "client"


def default_list_id(settings: Settings, client_id: str) -> str:
    """One list per workspace root set and client: stable across restarts and reconnects."""
    roots = settings.roots
    name = roots[0].name if roots else "workspace"
    digest = hashlib.sha256("\n".join(str(r) for r in roots).encode()).hexdigest()[:8]
    return f"{_slug(client_id)}@{_slug(name, 30)}-{digest}"


def resolve_list_id(rt: Runtime, list_id: str | None, client_id: str) -> str:
    if list_id is None or list_id.strip() in ("", DEFAULT_LIST):
        return default_list_id(rt.settings, client_id)
    return check_list_id(list_id.strip())


ListIdParam = Annotated[
    str | None,
    Field(description="Which list (letters, digits, . _ @ -); omit for this workspace's list."),
]


def todo_write(
    todos: Annotated[
        list[TodoInput],
        Field(description="The complete new list; pass ids back to keep them."),
    ],
    list_id: ListIdParam = None,
    *,
    rt: Runtime,
    call: CallContext,
) -> TodoList:
    """Replace the whole todo list (it persists across restarts and compaction). At most one item
    in_progress; mark items completed as soon as they are done. Returns the stored list and a summary."""
    target = resolve_list_id(rt, list_id, call.client_id)
    return todo_store(rt).write(target, todos)


def todo_read(list_id: ListIdParam = None, *, rt: Runtime, call: CallContext) -> TodoList:
    """Read the todo list (empty when never written), with a status summary."""
    return todo_store(rt).read(resolve_list_id(rt, list_id, call.client_id))


def todo_resource(rt: Runtime, list_id: str, origin: Any = None) -> str:
    """The todo list as JSON for the `todo://{list_id}` resource (`todo://default`: the default list)."""
    client_id = getattr(origin, "client_id", None) or "default"
    todo = todo_store(rt).read(resolve_list_id(rt, list_id, client_id))
    return json.dumps(todo.model_dump(mode="json"), ensure_ascii=False)


def reminder_for(rt: Runtime, client_id: str, list_id: str | None = None) -> str | None:
    """The unfinished-items reminder of the caller's list (default list when list_id is None), or None."""
    return todo_store(rt).reminder_text(resolve_list_id(rt, list_id, client_id))
