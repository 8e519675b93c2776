"""Worker processes: requests/s of a cheap tool call with `serve --transport http --workers N` on PostgreSQL.

For each worker count, starts the real server (`python -m mcp_server serve --transport http --workers N`,
state in PostgreSQL, a fresh data dir) on a free loopback port, writes one todo list, then runs CLIENTS
client processes for SECONDS seconds, each calling `todo_read` on that list in a loop over its own
keep-alive connection (2026-07-28 requests: stateless, any worker may answer; raw JSON-RPC over
http.client so the clients' own overhead stays small). Each client first asks `/health` on its
connection which worker it reached. Prints calls/s, latency percentiles, errors and how the
connections spread over the workers. The clients share the machine's cores with the server.

PostgreSQL: GENERALAGENT_DATABASE_URL (or --database-url); without it a throwaway server is started
with tests/pg_server.py (needs PostgreSQL's initdb and pg_ctl, as the tests do).

Usage: python -m bench.workers [--seconds 10] [--clients 8] [--workers 1,4]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LIST_ID = "bench-workers"
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench-workers", "version": "0"}}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def database(url: str | None) -> Iterator[str]:
    """The given PostgreSQL URL, or a throwaway server's (stopped afterwards)."""
    if url:
        yield url
        return
    sys.path.insert(0, str(ROOT))
    from tests.pg_server import INSTALL_HINT, PgServer, find_bindir

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("No GENERALAGENT_DATABASE_URL and no PostgreSQL binaries: " + INSTALL_HINT)
    server = PgServer(bindir)
    try:
        server.start()
        yield server.url()
    finally:
        server.stop()


@contextlib.contextmanager
def serve(url: str, workers: int, tmp: Path, extra_env: dict[str, str] | None = None) -> Iterator[tuple[int, int]]:
    """The server with `workers` processes; yields (port, pid); stopped (SIGTERM) afterwards. `extra_env`:
    more settings (they win over the data dir in `tmp`)."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    env.update(GENERALAGENT_DATA_DIR=str(tmp / f"data-{workers}"), GENERALAGENT_DATABASE_URL=url,
               GENERALAGENT_LOG_LEVEL="WARNING", PYTHONPATH=str(ROOT))
    env.update(extra_env or {})
    command = [sys.executable, "-m", "mcp_server", "serve", "--transport", "http", "--port", str(port),
               "--workers", str(workers)]
    log_path = tmp / f"server-{workers}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        _wait_healthy(port, process, log_path)
        yield port, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_healthy(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited ({process.returncode}); see {log}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"the server did not start; see {log}")


def call_body(tool: str, arguments: dict[str, Any], request_id: int = 1) -> bytes:
    params = {"name": tool, "arguments": arguments, "_meta": META}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}).encode()


def post_call(conn: http.client.HTTPConnection, tool: str, arguments: dict[str, Any]) -> tuple[int, bytes]:
    """One tools/call POST: (HTTP status, body)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool}
    conn.request("POST", "/mcp", call_body(tool, arguments), headers)
    response = conn.getresponse()
    return response.status, response.read()


def call(conn: http.client.HTTPConnection, tool: str, arguments: dict[str, Any]) -> bool:
    status, body = post_call(conn, tool, arguments)
    if status != 200:
        return False
    answer = json.loads(body)
    return "result" in answer and not answer["result"].get("isError")


def client(port: int, start: float, seconds: float) -> tuple[int, int, list[float]]:
    """One client process: (worker pid, errors, latencies in seconds)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/health")
    pid = int(json.loads(conn.getresponse().read())["pid"])
    while time.time() < start:
        time.sleep(0.001)
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        began = time.perf_counter()
        try:
            ok = call(conn, "todo_read", {"list_id": LIST_ID})
        except (OSError, http.client.HTTPException, ValueError):
            ok = False
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        latencies.append(time.perf_counter() - began)
        errors += 0 if ok else 1
    return pid, errors, latencies


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) used so far by `pid` and its descendants that still run (Linux /proc): the
    workers, and their children (postings builds)."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    try:
        entries = [e for e in Path("/proc").iterdir() if e.name.isdigit()]
    except OSError:
        return None
    parent, used = {}, {}
    for entry in entries:
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry.name)] = int(fields[1])  # fields[1]: the parent's pid
        used[int(entry.name)] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    ours = {pid}
    for _ in range(4):  # the server, its workers, their children
        ours |= {p for p, up in parent.items() if up in ours}
    return sum(used[p] for p in ours if p in used)


def wait_idle(pid: int, limit: float = 60.0) -> None:
    """Until the server's processes are done warming up (under 10% of a CPU for a second)."""
    deadline = time.monotonic() + limit
    before = cpu_seconds(pid)
    while before is not None and time.monotonic() < deadline:
        time.sleep(1.0)
        now = cpu_seconds(pid)
        if now is None or now - before < 0.1:
            return
        before = now


def measure(port: int, pid: int, clients: int, seconds: float) -> dict[str, Any]:
    wait_idle(pid)  # every worker's warm-up thread (indexes, tokenizers) finished
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    todos = [{"content": f"task {n}", "status": "pending"} for n in range(5)]
    assert call(conn, "todo_write", {"todos": todos, "list_id": LIST_ID}), "todo_write failed"
    for _ in range(50):  # warm the workers that this connection reaches (pools, first-call imports)
        call(conn, "todo_read", {"list_id": LIST_ID})
    start = time.time() + 1.0
    with multiprocessing.get_context("fork").Pool(clients) as pool:
        pending = pool.starmap_async(client, [(port, start, seconds)] * clients)
        time.sleep(max(0.0, start - time.time()))
        cpu_before = cpu_seconds(pid)
        results = pending.get(timeout=seconds + 120)
        cpu_after = cpu_seconds(pid)
    latencies = sorted(x for _, _, lat in results for x in lat)
    spread = Counter(pid for pid, _, _ in results)
    return {
        "calls": len(latencies),
        "per_second": len(latencies) / seconds,
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
        "errors": sum(e for _, e, _ in results),
        "spread": "/".join(str(n) for n in sorted(spread.values(), reverse=True)),
        "cpu_ms": (1000 * (cpu_after - cpu_before) / len(latencies)
                   if cpu_before is not None and cpu_after is not None and latencies else None),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", default="1,4", help="Worker counts to compare, comma-separated.")
    parser.add_argument("--database-url", default=os.environ.get("GENERALAGENT_DATABASE_URL"))
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    rows = []
    with database(args.database_url) as url, tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        for workers in counts:
            with serve(url, workers, Path(tmp)) as (port, pid):
                rows.append((workers, measure(port, pid, args.clients, args.seconds)))
    print(f"todo_read over HTTP (2026-07-28), PostgreSQL, {args.clients} client processes, {args.seconds:g} s each, "
          f"{os.cpu_count()} CPUs")
    print(f"{'workers':>7} {'calls':>7} {'calls/s':>8} {'vs 1st':>6} {'p50 ms':>7} {'p95 ms':>7} {'errors':>6} "
          f"{'server CPU ms/call':>18}  connections per worker")
    base = rows[0][1]["per_second"]
    for workers, row in rows:
        cpu = f"{row['cpu_ms']:.1f}" if row["cpu_ms"] is not None else "-"
        print(f"{workers:>7} {row['calls']:>7} {row['per_second']:>8.0f} {row['per_second'] / base:>5.2f}x "
              f"{row['p50_ms']:>7.1f} {row['p95_ms']:>7.1f} {row['errors']:>6} {cpu:>18}  {row['spread']}")


if __name__ == "__main__":
    main()
