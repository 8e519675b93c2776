"""HTTP load: do small calls stay fast while another client sends huge arguments? (issue 14, reproducer 6)

Starts the real server (`generalagent-mcp serve --transport http`) on a free loopback port with a
fresh data dir, then runs CLIENTS clients for SECONDS seconds, each in its own thread with its own
MCP session (raw JSON-RPC over http.client, so the clients' own overhead stays small):
- one "heavy" client alternates read_file with a 4 MB path, write_file with 4 MB of content
  and run_bash_command with a 4 MB command (each refused or asked for approval, never run);
- the others call `now` and read_file on a small file in a loop.
Prints per-kind call counts and latency percentiles; the target is p95 < 250 ms for the small
calls. Loopback only, bounded in time (SECONDS + start-up).

Usage: python -m bench.http_load [--seconds 30] [--clients 8]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

TARGET_P95_MS = 250.0
HEAVY_BYTES = 4_000_000  # just under the default 4 MiB body limit once wrapped in JSON-RPC
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(tmp: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    (tmp / "ws").mkdir()
    (tmp / "ws" / "small.txt").write_text("hello\n" * 50)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    env.update(GENERALAGENT_DATA_DIR=str(tmp / "data"), GENERALAGENT_ROOTS=str(tmp / "ws"),
               GENERALAGENT_BASH_ENABLED="1", GENERALAGENT_LOG_LEVEL="WARNING")
    script = Path(sys.executable).with_name("generalagent-mcp")
    command = [str(script), "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
    log = (tmp / "server.log").open("wb")
    process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    return wait_for_health(process, port, tmp / "server.log")


def wait_for_health(process: subprocess.Popen[bytes], port: int, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The started server once `GET /health` answers 200 (within 60 s; else it is killed)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return process, port
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"the server did not start; see {log}")


class Client:
    """One MCP session over Streamable HTTP (JSON-RPC posts; SSE or JSON answers)."""

    def __init__(self, port: int, name: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.session: str | None = None
        self.next_id = 1
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": name, "version": "0"}}
        self.post(json.dumps(self._request("initialize", init)).encode())
        self.post(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())

    def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}

    def call_body(self, tool: str, arguments: dict[str, Any]) -> bytes:
        return json.dumps(self._request("tools/call", {"name": tool, "arguments": arguments})).encode()

    def post(self, body: bytes) -> bytes:
        headers = dict(HEADERS)
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        self.conn.request("POST", "/mcp", body=body, headers=headers)
        response = self.conn.getresponse()
        self.session = response.getheader("Mcp-Session-Id") or self.session
        data = response.read()
        if response.status >= 400:
            raise RuntimeError(f"HTTP {response.status}: {data[:200]!r}")
        return data


def run_client(port: int, kind: str, stop: threading.Event, times: dict[str, list[float]], errors: list[str]) -> None:
    try:
        client = Client(port, f"bench-{kind}")
        if kind == "heavy":
            calls = [client.call_body("read_file", {"path": "a/" * (HEAVY_BYTES // 2)}),
                     client.call_body("write_file", {"path": "big.txt", "content": "x" * HEAVY_BYTES}),
                     client.call_body("run_bash_command", {"command": "echo " + "y" * HEAVY_BYTES})]
            only = os.environ.get("HTTP_LOAD_HEAVY")  # experiments: 0, 1 or 2 = one kind of heavy call
            calls = [calls[int(only)]] if only else calls
        else:
            calls = [client.call_body("now", {}), client.call_body("read_file", {"path": "small.txt"})]
        i = 0
        while not stop.is_set():
            started = time.perf_counter()
            client.post(calls[i % len(calls)])
            times.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
            i += 1
    except Exception as exc:  # a failing client is reported, not fatal to the table
        errors.append(f"{kind}: {type(exc).__name__}: {exc}")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--no-heavy", action="store_true", help="Baseline: only small clients.")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ga-http-load-") as tmp:
        process, port = start_server(Path(tmp))
        try:
            stop, times, errors = threading.Event(), {}, []  # type: ignore[var-annotated]
            kinds = ([] if args.no_heavy else ["heavy"]) + ["small"] * (args.clients - 1)
            threads = [threading.Thread(target=run_client, args=(port, kind, stop, times, errors), daemon=True)
                       for kind in kinds]
            for thread in threads:
                thread.start()
            time.sleep(args.seconds)
            stop.set()
            for thread in threads:
                thread.join(120)
        finally:
            process.terminate()
            process.wait(10)
    print(f"HTTP load: {args.clients} clients for {args.seconds:g} s on loopback (1 sends ~4 MB arguments)")
    print(f"{'client':8} {'calls':>7} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for kind, values in sorted(times.items()):
        print(f"{kind:8} {len(values):7d} {statistics.median(values):8.1f} {percentile(values, 0.95):8.1f} "
              f"{max(values):8.1f}")
    for error in errors:
        print("error:", error)
    small = times.get("small", [])
    ok = bool(small) and percentile(small, 0.95) < TARGET_P95_MS and not errors
    print(f"small calls p95 < {TARGET_P95_MS:g} ms: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
