"""Where the time of one MCP tool call goes: ours, the SDK's, pydantic's, JSON, the event loop.

    .venv/bin/python -m bench.mcp_profile [--calls 300] [--keep DIR] [--tool search_documents] [--top 25]

The SDK client talks to our server over the in-memory transport (one process, so one profile holds both
sides; the stdio transport adds two pipe crossings and the JSON text, timed by bench.mcp_overhead), while
cProfile records `--calls` calls of `search_documents` (DEV questions, top 10) after 20 warm-up calls. Each
function's own time (tottime) is added to the group of the file it is in:

- ours: mcp_server/, tools/, context/, indexing/, foundation/ (split: the tool's own work, i.e. tools/
  indexing/ context/, and our MCP wiring, mcp_server/ foundation/);
- the SDK: mcp/ and mcp_types/ (split: client and server sides by path);
- pydantic (pydantic/, pydantic_core), jsonschema (and its referencing, rpds), json, anyio (and asyncio,
  the event loop), everything else.

Then the functions with the most cumulative time from the SDK client's and server's entry points, so the
report can say which of the SDK's steps cost what (e.g. the client's output-schema check).

`--split` times instead, without a profiler, medians over `--calls` interleaved calls: the whole call
(`Client.call_tool`), the server's part (a middleware put first in the SDK's chain), our tool entry
(`mcp_server.server.make_entry`'s function, which the SDK calls), our dispatch (`Dispatcher.run`), the tool function called directly, and the client's output-schema check; the
differences are the SDK client and transport, the SDK's server pipeline with our entry and middlewares,
and our dispatch point (gate, audit, the worker thread).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.mcp_overhead import DEFAULT_EVAL, WARM_UP, build_index, built_here, chunk_corpora, load_jsonl

GROUPS = (
    ("/mcp/client/", "SDK client"),
    ("/mcp/server/", "SDK server"),
    ("/mcp/shared/", "SDK shared (sessions, dispatcher)"),
    ("/mcp/", "SDK other"),
    ("/mcp_types/", "SDK types (mcp_types)"),
    ("/pydantic_core/", "pydantic"),
    ("/pydantic/", "pydantic"),
    ("/jsonschema", "jsonschema (client output check)"),
    ("/referencing/", "jsonschema (client output check)"),
    ("/rpds", "jsonschema (client output check)"),
    ("/json/", "json"),
    ("/anyio/", "anyio / asyncio (event loop, threads)"),
    ("/asyncio/", "anyio / asyncio (event loop, threads)"),
    ("/threading.py", "anyio / asyncio (event loop, threads)"),
    ("/concurrent/", "anyio / asyncio (event loop, threads)"),
    ("/mcp_server/", "ours: MCP wiring (mcp_server/)"),
    ("/foundation/", "ours: foundation/ (bounding, schemas, checks)"),
    ("/tools/", "ours: the tool (tools/, indexing/, context/)"),
    ("/indexing/", "ours: the tool (tools/, indexing/, context/)"),
    ("/context/", "ours: the tool (tools/, indexing/, context/)"),
)


def group_of(filename: str) -> str:
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins (C calls, attributed by caller's file elsewhere)"
    for part, name in GROUPS:
        if part in filename:
            return name
    return "other"


def profile(data: Path, ws: Path, queries: list[str], calls: int, tool: str) -> tuple[pstats.Stats, float]:
    import anyio
    from mcp.client import Client

    async def run() -> tuple[pstats.Stats, float]:
        server, _ = built_here(data, ws)
        async with Client(server, mode="legacy") as client:
            while any(thread.name == "warm-up" for thread in threading.enumerate()):
                await anyio.sleep(0.1)
            for i in range(WARM_UP):
                await client.call_tool(tool, _arguments(tool, queries, i))
            profiler = cProfile.Profile()
            started = time.perf_counter()
            profiler.enable()
            for i in range(calls):
                await client.call_tool(tool, _arguments(tool, queries, i))
            profiler.disable()
            return pstats.Stats(profiler), (time.perf_counter() - started) * 1000 / calls

    return anyio.run(run)


def split(data: Path, ws: Path, queries: list[str], calls: int, tool: str) -> dict[str, float]:
    """Medians (ms) of each layer's time per call; see the module doc."""
    import functools
    import statistics

    import anyio
    from mcp.client import Client
    from mcp.client.session import ClientSession

    import mcp_server.server as our_server
    from bench.mcp_overhead import searching
    from mcp_server.dispatch import Dispatcher

    spans: dict[str, list[float]] = defaultdict(list)
    original_run, original_check = Dispatcher.run, ClientSession.validate_tool_result

    async def timed_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original_run(self, *args, **kwargs)
        finally:
            spans["dispatch"].append(time.perf_counter() - started)

    async def timed_check(self: Any, name: str, result: Any) -> None:
        started = time.perf_counter()
        try:
            await original_check(self, name, result)
        finally:
            spans["client check"].append(time.perf_counter() - started)

    original_entry = our_server.make_entry

    def timed_entry(*args: Any, **kwargs: Any) -> Any:
        entry = original_entry(*args, **kwargs)

        @functools.wraps(entry)
        async def timed(*a: Any, **k: Any) -> Any:
            started = time.perf_counter()
            try:
                return await entry(*a, **k)
            finally:
                spans["entry"].append(time.perf_counter() - started)

        return timed

    async def outermost(ctx: Any, call_next: Any) -> Any:
        started = time.perf_counter()
        try:
            return await call_next(ctx)
        finally:
            if ctx.method == "tools/call":
                spans["server"].append(time.perf_counter() - started)

    async def run() -> None:
        server, dispatcher = built_here(data, ws)
        server.middleware.insert(0, outermost)
        direct = searching(dispatcher.runtime) if tool == "search_documents" else None
        async with Client(server, mode="legacy") as client:
            while any(thread.name == "warm-up" for thread in threading.enumerate()):
                await anyio.sleep(0.1)
            for i in range(WARM_UP):
                await client.call_tool(tool, _arguments(tool, queries, i))
            spans.clear()
            for i in range(calls):
                arguments = _arguments(tool, queries, i)
                started = time.perf_counter()
                await client.call_tool(tool, arguments)
                spans["call"].append(time.perf_counter() - started)
                if direct is not None:
                    started = time.perf_counter()
                    direct(arguments["query"])
                    spans["tool function"].append(time.perf_counter() - started)

    Dispatcher.run, ClientSession.validate_tool_result = timed_run, timed_check  # type: ignore[method-assign]
    our_server.make_entry = timed_entry
    try:
        anyio.run(run)
    finally:
        Dispatcher.run, ClientSession.validate_tool_result = original_run, original_check  # type: ignore[method-assign]
        our_server.make_entry = original_entry
    return {name: statistics.median(times) * 1000 for name, times in spans.items()}


def split_lines(m: dict[str, float]) -> list[str]:
    tool = m.get("tool function", 0.0)
    rows = [("the whole call (SDK client, in-memory)", m["call"]),
            ("SDK client and transport (call - server)", m["call"] - m["server"]),
            ("  of which the client's output-schema check", m["client check"]),
            ("SDK server pipeline, with our middlewares and form resolvers (server - entry)",
             m["server"] - m["entry"]),
            ("our entry: the origin, log forwarding, the result's JSON (entry - dispatch)", m["entry"] - m["dispatch"]),
            ("our dispatch point: gate, audit, worker thread (dispatch - tool function)", m["dispatch"] - tool),
            ("the tool function (called directly, interleaved)", tool)]
    return ["| layer | median ms per call |", "|---|---:|", *(f"| {name} | {ms:.3f} |" for name, ms in rows)]


def _arguments(tool: str, queries: list[str], i: int) -> dict[str, Any]:
    return {"query": queries[i % len(queries)]} if tool == "search_documents" else {}


def grouped(stats: pstats.Stats, calls: int) -> list[tuple[str, float]]:
    """(group, ms per call) by own time, largest first."""
    totals: dict[str, float] = defaultdict(float)
    for (filename, _line, _name), (_cc, _nc, tottime, _cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        totals[group_of(filename)] += tottime
    return sorted(((g, t * 1000 / calls) for g, t in totals.items()), key=lambda item: -item[1])


def top_cumulative(stats: pstats.Stats, calls: int, top: int) -> list[tuple[float, str]]:
    """The functions with the most cumulative time per call (ms) among the SDK's and ours."""
    rows = []
    for (filename, line, name), (_cc, _nc, _tot, cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        group = group_of(filename)
        if group.startswith(("SDK", "ours", "jsonschema", "pydantic")):
            short = filename.split("site-packages/")[-1].split("/h31parts/")[-1]
            rows.append((cum * 1000 / calls, f"{short}:{line} {name} [{group}]"))
    return sorted(rows, reverse=True)[:top]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--tool", default="search_documents", choices=["search_documents", "todo_read"])
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--keep", type=Path, default=None, help="the index's folder (re-used; see bench.mcp_overhead)")
    parser.add_argument("--split", action="store_true", help="time the layers (no profiler) instead")
    args = parser.parse_args(argv)
    queries = [q["query"] for lang in ("zh", "en") for q in load_jsonl(args.eval / lang / "queries_dev.jsonl")
               if q["query"].strip()]
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-mcp-profile-"))
    try:
        data, ws = work / "latency" / "data", work / "latency" / "ws"
        if not (data / "index.sqlite3").exists():
            build_index(data, ws, chunk_corpora(args.eval), len(chunk_corpora(args.eval)))
        if args.split:
            print(f"{args.tool}, {args.calls} calls, medians (differences of medians):")
            print("\n".join(split_lines(split(data, ws, queries, args.calls, args.tool))))
            return 0
        stats, wall = profile(data, ws, queries, args.calls, args.tool)
        print(f"{args.tool} through the SDK client, in-memory transport, {args.calls} calls: {wall:.2f} ms per call "
              "under the profiler (its own cost included)")
        print("| group (own time) | ms per call |\n|---|---:|")
        for group, ms in grouped(stats, args.calls):
            print(f"| {group} | {ms:.3f} |")
        print("\n| cumulative ms per call | function |\n|---:|---|")
        for ms, where in top_cumulative(stats, args.calls, args.top):
            print(f"| {ms:.3f} | {where} |")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
