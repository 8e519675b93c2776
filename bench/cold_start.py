"""Cold start over stdio: spawn -> `tools/list` answered, ours vs a minimal MCPServer, side by side.

Both servers run under this interpreter, get the same three frames (initialize, initialized,
tools/list) the moment they are spawned, and are timed until the tools/list answer arrives.
Runs alternate between the two; the medians and their ratio are printed (target <= 1.25x).

Run: .venv/bin/python -m bench.cold_start [--runs 9] [--imports]
`--imports` also lists the slowest imports of our own start-up (python -X importtime).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_RATIO = 1.25
CONSOLE_SCRIPT = Path(sys.executable).with_name("generalagent-mcp")
MINIMAL_SERVER = '''
from mcp.server import MCPServer

server = MCPServer("minimal")


@server.tool()
def now() -> str:
    """Current time."""
    import datetime
    return datetime.datetime.now(datetime.UTC).isoformat()


server.run("stdio")
'''
FRAMES = b"".join(
    (json.dumps(message) + "\n").encode()
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "cold-start-bench", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    )
)


def clean_env(data_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    env["GENERALAGENT_DATA_DIR"] = data_dir
    return env


def time_to_tools_list(command: list[str], env: dict[str, str], cwd: str) -> float:
    """Seconds from spawn until the tools/list response line is read from stdout."""
    with tempfile.TemporaryFile() as errlog:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=errlog, env=env, cwd=cwd)
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(FRAMES)
        process.stdin.flush()
        try:
            for line in process.stdout:
                message = json.loads(line)
                if message.get("id") == 2:
                    if "result" not in message or not message["result"].get("tools"):
                        raise RuntimeError(f"bad tools/list answer: {message}")
                    return time.perf_counter() - start
            errlog.seek(0)
            tail = errlog.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"{command[0]} exited before answering tools/list:\n{tail}")
        finally:
            process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def measure(runs: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="cold-start-") as tmp:
        minimal_script = Path(tmp) / "minimal_server.py"
        minimal_script.write_text(MINIMAL_SERVER)
        commands = {
            "generalagent-mcp serve": [str(CONSOLE_SCRIPT), "serve"],
            "minimal MCPServer (1 tool)": [sys.executable, str(minimal_script)],
        }
        env = clean_env(str(Path(tmp) / "data"))
        for command in commands.values():  # warm the page cache and the data dir; not counted
            time_to_tools_list(command, env, tmp)
        timings: dict[str, list[float]] = {name: [] for name in commands}
        for run in range(runs):
            order = list(commands.items()) if run % 2 == 0 else list(reversed(commands.items()))
            for name, command in order:
                timings[name].append(time_to_tools_list(command, env, tmp))
        return timings


OUR_STARTUP = ("from mcp_server.cli import build_parser; build_parser(); "
               "from mcp_server.server import build_server; from foundation.settings import load_settings; "
               "build_server(load_settings())")
MINIMAL_STARTUP = MINIMAL_SERVER.replace('server.run("stdio")', "")


def import_times(code: str) -> dict[str, int]:
    """{module: self microseconds} of everything `code` imports (python -X importtime)."""
    with tempfile.TemporaryDirectory(prefix="cold-start-") as tmp:
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                              env=clean_env(tmp), cwd=tmp, check=True)
    times: dict[str, int] = {}
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            self_us, _, module = line.removeprefix("import time:").split("|")
            times[module.strip()] = int(self_us)
    return times


def extra_imports() -> tuple[dict[str, int], list[tuple[int, str]]]:
    """What our start-up imports on top of a minimal MCPServer: self time per top-level package,
    and the slowest extra modules."""
    ours, minimal = import_times(OUR_STARTUP), import_times(MINIMAL_STARTUP)
    extra = {module: us for module, us in ours.items() if module not in minimal}
    by_package: dict[str, int] = {}
    for module, us in extra.items():
        by_package[module.split(".")[0]] = by_package.get(module.split(".")[0], 0) + us
    return by_package, sorted(((us, module) for module, us in extra.items()), reverse=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="Timed runs per server (default 9).")
    parser.add_argument("--imports", action="store_true", help="Also list the slowest start-up imports.")
    args = parser.parse_args(argv)

    timings = measure(args.runs)
    ours, minimal = (statistics.median(t) for t in timings.values())
    print(f"\nCold start over stdio: spawn -> tools/list answered ({args.runs} runs each, alternating)\n")
    print(f"| {'server':<28} | {'median ms':>9} | {'min ms':>7} | {'max ms':>7} |")
    print(f"|{'-' * 30}|{'-' * 11}|{'-' * 9}|{'-' * 9}|")
    for name, values in timings.items():
        print(f"| {name:<28} | {statistics.median(values) * 1000:>9.0f} | {min(values) * 1000:>7.0f} "
              f"| {max(values) * 1000:>7.0f} |")
    ratio = ours / minimal
    verdict = "OK" if ratio <= TARGET_RATIO else "OVER TARGET"
    print(f"\nratio ours/minimal: {ratio:.2f}x (target <= {TARGET_RATIO:.2f}x) {verdict}")
    if args.imports:
        by_package, slowest = extra_imports()
        print("\nImports on top of a minimal MCPServer (python -X importtime, self time):\n")
        print(f"| {'top-level package':<40} | {'self ms':>8} |")
        print(f"|{'-' * 42}|{'-' * 10}|")
        for package, us in sorted(by_package.items(), key=lambda item: -item[1])[:15]:
            print(f"| {package:<40} | {us / 1000:>8.1f} |")
        print(f"| {'TOTAL':<40} | {sum(by_package.values()) / 1000:>8.1f} |")
        print(f"\n| {'slowest extra modules':<60} | {'self ms':>8} |")
        print(f"|{'-' * 62}|{'-' * 10}|")
        for us, module in slowest[:15]:
            print(f"| {module:<60} | {us / 1000:>8.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
