"""Several server processes on one PostgreSQL database: a grant made in one process is consumed
exactly once by racing processes, and a process waiting for a decision is woken at once (NOTIFY),
not by its poll; writes from one process are seen by the next read in another."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

CONSUMER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from foundation.storage import open_database
from mcp_server.approval.store import ApprovalStore
store = ApprovalStore(open_database(__import__("pathlib").Path("/nonexistent"), sys.argv[2]), 600)
start = float(sys.argv[3])
while time.time() < start:
    time.sleep(0.001)
won = [store.consume("poke", {"n": n}) is not None for n in range(int(sys.argv[4]))]
print(json.dumps(won))
"""

WAITER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from foundation.storage import open_database
from mcp_server.approval.store import ApprovalStore
store = ApprovalStore(open_database(__import__("pathlib").Path("/nonexistent"), sys.argv[2]), 600)
database = store.database
database.poll_seconds = 600.0  # a poll would wake it only at the wait's end: NOTIFY or nothing
listen = database.listen
def listening(channel):
    listener = listen(channel)  # LISTEN is done
    print("listening", flush=True)
    return listener
database.listen = listening
decided = store.wait_for_decision(sys.argv[3], timeout=60)
print(json.dumps({"status": decided.status, "at": time.time()}), flush=True)
"""


def _spawn(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", script, str(ROOT), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _store(url: str) -> Any:
    from foundation.storage import open_database
    from mcp_server.approval.store import ApprovalStore

    return ApprovalStore(open_database(Path("/nonexistent"), url), 600)


def test_a_grant_is_consumed_exactly_once_across_processes(pg_url: str) -> None:
    store = _store(pg_url)
    calls = 8
    for n in range(calls):
        pending = store.request("poke", {"n": n}, risk="high", reason="r", rule_id="x", origin="client:c")
        store.decide(pending.id, True, by="cli")  # granted here, in "another process" than the consumers
    start = time.time() + 1.5
    procs = [_spawn(CONSUMER, pg_url, str(start), str(calls)) for _ in range(4)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    for n in range(calls):  # every grant was used by exactly one of the racing processes
        assert sum(r[n] for r in results) == 1, results
    assert {a.status for a in store._query("SELECT * FROM approvals", ())} == {"used"}
    store.database.close()


def test_a_decision_in_one_process_wakes_a_waiter_in_another_at_once(pg_url: str) -> None:
    store = _store(pg_url)
    pending = store.request("poke", {"n": 1}, risk="high", reason="r", rule_id="x", origin="client:c")
    waiter = _spawn(WAITER, pg_url, pending.id)
    assert waiter.stdout is not None and waiter.stdout.readline().strip() == "listening"
    time.sleep(1.0)  # the waiter has checked once by now; it does not poll again
    decided_at = time.time()
    store.decide(pending.id, True, by="cli")
    out, err = waiter.communicate(timeout=120)
    assert waiter.returncode == 0, err
    woken = json.loads(out)
    assert woken["status"] == "granted"
    assert woken["at"] - decided_at < 30  # woken by NOTIFY at once (a loaded machine: seconds); else at the 60 s end
    store.database.close()


def test_writes_in_one_process_are_read_by_the_next_request_in_another(pg_url: str, tmp_path: Path) -> None:
    from foundation.settings import load_settings
    from tools.runtime import CallContext, Runtime
    from tools.todos import todo_read, todo_write

    settings = load_settings({"data_dir": tmp_path, "database_url": pg_url}, environ={})
    first, second = Runtime(settings), Runtime(settings)  # two servers: own pools, one database
    call = CallContext(tool="todo_write", client_id="team")
    try:
        for n in range(20):
            writer, reader = (first, second) if n % 2 else (second, first)
            todo_write([{"content": f"step {n}", "status": "pending"}], "shared", rt=writer, call=call)
            seen = todo_read("shared", rt=reader, call=call)
            assert [i.content for i in seen.items] == [f"step {n}"] and seen.version == n + 1
    finally:
        first.close()
        second.close()
