"""Two real server processes writing the same todo list: never corrupt, always a whole written list,
no lost version (on the backend under test: SQLite file locks, or PostgreSQL serializable writes)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.storage

ROOT = Path(__file__).resolve().parent.parent

WRITER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from foundation.settings import load_settings
from tools.runtime import CallContext, Runtime
from tools.todos import todo_read, todo_write
settings = load_settings({"data_dir": sys.argv[2], "database_url": sys.argv[5] or None}, environ={})
rt = Runtime(settings)  # what each server process builds
call = CallContext(tool="todo_write", client_id="shared-client")
tag, rounds = sys.argv[3], int(sys.argv[4])
torn = 0
for n in range(rounds):
    todo_write([{"content": f"{tag}-{n}-{k}", "status": "pending", "id": f"{tag}{n}x{k}"}
                for k in range(1 + n % 7)], "shared", rt=rt, call=call)
    seen = todo_read("shared", rt=rt, call=call).items
    prefixes = {item.content.rsplit("-", 1)[0] for item in seen}
    if len(prefixes) != 1 or len(seen) != 1 + int(seen[0].content.split("-")[1]) % 7:
        torn += 1
print(json.dumps({"torn": torn}))
"""


def test_two_processes_write_the_same_list(data_dir: Path, database: object, database_url: str | None) -> None:
    from context.todos import TodoStore

    rounds = 200
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(ROOT), str(data_dir), tag, str(rounds), database_url or ""],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for tag in ("A", "B")
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert json.loads(out) == {"torn": 0}
    if database_url is None:
        with sqlite3.connect(data_dir / "todos.sqlite3") as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored = TodoStore(database).read("shared")  # type: ignore[arg-type]
    contents, version = [i.content for i in stored.items], stored.version
    tag, n = contents[0].split("-")[:2]
    assert contents == [f"{tag}-{n}-{k}" for k in range(1 + int(n) % 7)]  # exactly one written list
    assert version == 2 * rounds  # no write was lost
