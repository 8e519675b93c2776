"""The walks a reader makes through the code for one call: hops between product files, and returns to one
already visited (issue 31's measure of how far a new engineer must jump to follow a call).

    .venv/bin/python -m bench.walks [--files] [--keep DIR]

Three calls, each through the one dispatch point (`Dispatcher.run`, as a client's call after the SDK has
handed over its arguments: validation, the approval gate, the tool, result bounding):

- search: `search_documents` for a query on a small index of text files;
- shell: `run_bash_command` of `ls` (the gate, the policy, the shell analysis, the sandbox);
- compaction: `compact_context` of a 60-message transcript without an LLM (the fallback summary).

`sys.setprofile` (and `threading.setprofile`, for the worker thread a sync tool runs in) sees every Python
call; a call counts when its function is in a product file (mcp_server/, tools/, context/, indexing/,
foundation/, policy/). A hop is a call whose file differs from the file of the nearest product frame
calling it (the module a reader must open next); a return is a hop into a file the walk had already
visited. A hop is counted once per pair of functions (caller, callee), as a reader follows it once however
often a loop makes it; the hops executed (every call) are shown beside. Each call runs twice and the second
run is counted (the first also imports and warms caches).
`--files` lists the hops per file.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = tuple(f"{ROOT / name}/" for name in ("mcp_server", "tools", "context", "indexing", "foundation", "policy"))


@dataclass
class Walk:
    """What one traced call did: hops in order (callee files), calls counted."""

    hops: list[str] = field(default_factory=list)
    returns: Counter[str] = field(default_factory=Counter)
    visited: set[str] = field(default_factory=set)
    edges: set[tuple[CodeType, CodeType]] = field(default_factory=set)
    calls: int = 0
    executed_hops: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_call(self, frame: FrameType) -> None:
        callee = frame.f_code
        if not callee.co_filename.startswith(PRODUCT):
            return
        caller = _product_caller(frame.f_back)
        with self.lock:
            self.calls += 1
            if caller is None:
                self.visited.add(callee.co_filename)
            elif caller.co_filename != callee.co_filename:
                self.executed_hops += 1
                if (caller, callee) not in self.edges:  # a reader follows each call site once, loops or not
                    self.edges.add((caller, callee))
                    self._hop(caller.co_filename, callee.co_filename)

    def _hop(self, caller: str, callee: str) -> None:
        self.hops.append(callee)
        if callee in self.visited:
            self.returns[callee] += 1
        self.visited.update((caller, callee))


def _product_caller(frame: FrameType | None) -> CodeType | None:
    while frame is not None:
        if frame.f_code.co_filename.startswith(PRODUCT):
            return frame.f_code
        frame = frame.f_back
    return None


class Tracer:
    """One profile function for every thread; it records into `walk` while one is set."""

    def __init__(self) -> None:
        self.walk: Walk | None = None

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        walk = self.walk
        if walk is not None and event == "call":
            walk.on_call(frame)

    def install(self) -> None:
        sys.setprofile(self)
        threading.setprofile(self)  # threads started from now on (anyio's worker threads among them)

    def traced(self, run: Callable[[], object]) -> Walk:
        run()  # imports, caches, the first connection: not what a reader walks every time
        self.walk = walk = Walk()
        try:
            run()
        finally:
            self.walk = None
        return walk


def _relative(path: str) -> str:
    return Path(path).relative_to(ROOT).as_posix()


def transcript(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for k in range(n // 3):
        out.append({"role": "user", "content": f"Step {k}: please look at module {k}. Always use pytest."})
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{k}", "type": "function", "function": {"name": "read_file", "arguments": f'{{"path": "m{k}.py"}}'}}]})
        out.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"def f{k}():\n    return {k}\n" * 20})
    return out


def calls(dispatcher: Any, ws: Path) -> dict[str, Callable[[], object]]:
    import anyio

    from foundation.calls import CallOrigin

    origin = CallOrigin(kind="client", client_id="walks", session_id="walks")

    def run(tool: str, args: dict[str, Any]) -> Callable[[], object]:
        return lambda: anyio.run(lambda: dispatcher.run(tool, args, origin))

    return {
        "search": run("search_documents", {"query": "budget approval for the harbour bridge"}),
        "shell": run("run_bash_command", {"command": "ls"}),
        "compaction": run("compact_context", {"messages": transcript(60), "context_window": 4000,
                                              "strategy": "compact"}),
    }


def build(work: Path) -> tuple[Any, Path]:
    import anyio

    from foundation.calls import CallOrigin
    from foundation.settings import load_settings
    from mcp_server.server import build_server
    from tools.index_services import memory_index

    ws, data = work / "ws", work / "data"
    (ws / "notes").mkdir(parents=True, exist_ok=True)
    for k in range(20):
        (ws / "notes" / f"n{k}.txt").write_text(
            f"Meeting {k}.\nThe harbour bridge budget needs approval from the council.\nItem {k} is done.\n")
    settings = load_settings({"data_dir": data, "roots": [ws], "bash_enabled": True}, environ={})
    _server, dispatcher = build_server(settings)
    anyio.run(lambda: dispatcher.run("index_path", {"path": str(ws / "notes")}, CallOrigin(kind="client")))
    memory_index(dispatcher.runtime).build_now()
    return dispatcher, ws


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", action="store_true", help="list the hops into each file")
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-walks-"))
    tracer = Tracer()
    tracer.install()
    try:
        dispatcher, ws = build(work)
        print("| walk | product calls | hops executed | hops (distinct caller -> callee) | returns to a file already "
              "visited | files | most returns |")
        print("|---|---:|---:|---:|---:|---:|---|")
        walks = {}
        for name, run in calls(dispatcher, ws).items():
            walk = walks[name] = tracer.traced(_quiet(run))
            top = ", ".join(f"{_relative(f)} {n}" for f, n in walk.returns.most_common(3))
            print(f"| {name} | {walk.calls} | {walk.executed_hops} | {len(walk.hops)} | {sum(walk.returns.values())} | "
                  f"{len(walk.visited)} | {top} |")
        if args.files:
            for name, walk in walks.items():
                print(f"\n{name}: hops into each file")
                for path, count in Counter(walk.hops).most_common():
                    print(f"  {count:4d}  {_relative(path)}")
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def _quiet(run: Callable[[], object]) -> Callable[[], object]:
    """The call; a refusal (the shell without a sandbox, say) is part of the walk, not a failure of it."""
    from foundation.errors import GeneralAgentError

    def call() -> object:
        try:
            return run()
        except GeneralAgentError as exc:
            print(f"  ({type(exc).__name__}: {str(exc)[:120]})", file=sys.stderr)
            return None

    return call


if __name__ == "__main__":
    raise SystemExit(main())
