"""Random sequences of store operations give the same observable results on SQLite and PostgreSQL.

Each example runs one generated program of todo, memory, context, approval and thread operations
against a fresh SQLite data dir and a fresh PostgreSQL schema, and compares what every operation
returned (or the error it raised). Times come from a counting clock so both runs see the same order.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundation.errors import GeneralAgentError
from foundation.storage import open_database

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12) | st.sampled_from(
    ["Prefers pytest", "prefers PYTEST.", "用户喜欢绿茶", "Deploys on Fridays", "  ", "a\x00b", "50% done?"])
LIST_IDS = st.sampled_from(["l1", "l2", "bad id"])
ITEM = st.fixed_dictionaries({
    "content": TEXT,
    "status": st.sampled_from(["pending", "in_progress", "completed", "done"]),
}, optional={"id": st.sampled_from(["a", "b", "c"]), "priority": st.sampled_from(["low", "high"]),
             "active_form": TEXT})
OPS = st.one_of(
    st.tuples(st.just("todo_write"), LIST_IDS, st.lists(ITEM, max_size=4)),
    st.tuples(st.just("todo_read"), LIST_IDS),
    st.tuples(st.just("remember"), TEXT, st.floats(0, 1), st.sampled_from([None, "pref", "fact"])),
    st.tuples(st.just("forget"), st.lists(st.integers(1, 6), max_size=3)),
    st.tuples(st.just("page"), st.integers(0, 3), st.integers(1, 3), st.sampled_from([None, "pref"])),
    st.tuples(st.just("summary"), st.sampled_from(["c1", "c2"]), TEXT, st.integers(0, 9)),
    st.tuples(st.just("state"), st.sampled_from(["c1", "c2"]), st.dictionaries(st.sampled_from("xyz"), TEXT)),
    st.tuples(st.just("request"), st.sampled_from(["poke", "zap"]), st.integers(0, 2)),
    st.tuples(st.just("decide"), st.integers(0, 4), st.booleans(), st.sampled_from(["once", "today", "tool"])),
    st.tuples(st.just("consume"), st.sampled_from(["poke", "zap"]), st.integers(0, 2)),
    st.tuples(st.just("thread"), st.sampled_from(["t1", "t2"]), st.lists(TEXT, max_size=2)),
)


@contextmanager
def counting_clock() -> Iterator[None]:
    ticks = iter(range(1_700_000_000, 1_800_000_000))
    with mock.patch("time.time", side_effect=lambda: float(next(ticks))):
        yield


def run_program(data_dir: Path, url: str | None, program: list[tuple[Any, ...]]) -> list[Any]:
    from context.memory import MemoryStore, recall_ranked
    from context.store import ContextStore
    from context.subagent import StepDelta, ThreadStore
    from context.todos import TodoStore
    from mcp_server.approval.store import ApprovalStore

    db = open_database(data_dir, url)
    todos, memory, context = TodoStore(db), MemoryStore(db), ContextStore(db)
    approvals, threads = ApprovalStore(db, 600), ThreadStore(db)
    ids: list[str] = []  # approval ids in the order they appeared (random ids differ per run)

    def named(text: str) -> str:
        for k, approval_id in enumerate(ids):
            text = text.replace(approval_id, f"<ap{k}>")
        return re.sub(r"\b[0-9a-f]{8}\b", "<gen>", text)  # generated todo item ids

    def step(op: tuple[Any, ...]) -> Any:
        kind = op[0]
        if kind == "todo_write":
            done = todos.write(op[1], op[2])
            return [(i.content, i.status, i.priority, i.active_form) for i in done.items], done.summary, done.version
        if kind == "todo_read":
            got = todos.read(op[1])
            return [(named(i.id), i.content, i.status) for i in got.items], got.version
        if kind == "remember":
            fact, action = memory.remember(op[1], op[2], op[3])
            return fact.id, fact.content, fact.category, fact.confidence, action
        if kind == "forget":
            return memory.delete(op[1])
        if kind == "page":
            facts, total = memory.page(op[1], op[2], op[3])
            ranked = recall_ranked(memory, "pytest 绿茶 fridays")
            return [f.id for f in facts], total, [(s.fact.id, s.score) for s in ranked]
        if kind == "summary":
            context.put(op[1], op[2], op[3], "h", "llm")
            got = context.get(op[1])
            return got and (got.summary, got.covered_messages)
        if kind == "state":
            context.put_state(op[1], op[2])
            return context.get_state(op[1])
        if kind == "request":
            approval = approvals.request(op[1], {"n": op[2]}, risk="high", reason="r", rule_id="x", origin="c")
            if approval.id not in ids:
                ids.append(approval.id)
            return named(approval.id), approval.status
        if kind == "decide":
            if op[1] >= len(ids):
                return None
            decided = approvals.decide(ids[op[1]], op[2], by="cli", scope=op[3])
            return decided.status, decided.scope
        if kind == "consume":
            used = approvals.consume(op[1], {"n": op[2]})
            return used and named(used.id)
        if kind == "thread":
            try:
                threads.load(op[1])
            except GeneralAgentError:
                threads.create(op[1], None, ["now"], "c")
            threads.save_step(op[1], StepDelta([{"role": "user", "content": t} for t in op[2]], 1, 0, 3))
            got = threads.load(op[1])
            return got.status, got.loops, got.tokens, got.messages
        raise AssertionError(kind)

    out: list[Any] = []
    try:
        with counting_clock():
            for op in program:
                try:
                    out.append(("ok", step(op)))
                except GeneralAgentError as exc:
                    out.append(("error", type(exc).__name__, named(str(exc))))
    finally:
        db.close()
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(program=st.lists(OPS, min_size=1, max_size=14))
def test_same_results_on_sqlite_and_postgresql(pg_server: Any, program: list[tuple[Any, ...]]) -> None:
    url, name = pg_server.fresh_schema()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            on_sqlite = run_program(Path(tmp), None, program)
        on_postgres = run_program(Path("/nonexistent-data-dir"), url, program)
    finally:
        pg_server.disconnect(name)
    assert on_postgres == on_sqlite


def test_the_program_interpreter_sees_errors_the_same_way(tmp_path: Path) -> None:
    """A fixed program on SQLite alone: what the property compares is meaningful (errors are named)."""
    out = run_program(tmp_path, None, [("todo_write", "bad id", []), ("remember", "a\x00b", 0.5, None),
                                       ("decide", 0, True, "once"), ("request", "poke", 1),
                                       ("decide", 0, True, "once"), ("consume", "poke", 1), ("consume", "poke", 1)])
    assert out[0][0] == "error" and "Invalid list_id" in out[0][2]
    assert out[1][0] == "error" and "NUL" in out[1][2]
    assert out[2:] == [("ok", None), ("ok", ("<ap0>", "pending")), ("ok", ("granted", "once")), ("ok", "<ap0>"),
                       ("ok", None)]


pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
