"""README's first page, followed literally (issue 35): it reads in two minutes; every command in it runs as
printed (Claude Code's `claude mcp add` by the real, pinned Claude Code CLI: scripts/claude_code.sh); every
client configuration starts the server as written and answers a first search; and `./scripts/serve.sh` in
a terminal says that it waits for a client; Gemini CLI (real, pinned) connects with the settings shown.
(Claude Desktop, VS Code and Cursor themselves are not run: their configuration is started here as they
would start it.)"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = ("claude_desktop_config.json", "claude mcp add", ".vscode/mcp.json", ".cursor/mcp.json",
           ".gemini/settings.json")


def first_page() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text[: text.index("\n---\n")]


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", first_page(), re.S)


def commands(block: str) -> list[str]:
    """The commands of a sh block (continuation lines joined, comments dropped)."""
    joined = block.replace("\\\n", " ")
    return [line.split("  #")[0].strip() for line in joined.splitlines() if line.strip()]


def test_first_page_reads_in_two_minutes_and_names_every_client() -> None:
    page = first_page()
    prose = re.sub(r"```.*?```", "", page, flags=re.S)
    assert len(prose.split()) <= 480  # two minutes at ~240 words a minute (the configs are skimmed)
    for needle in (*CLIENTS, "Approve your first write", "approve ap-"):
        assert needle in page, needle
    for heading in ("## Quick start", "## Connect a client", "## Approve your first write"):
        assert heading in page


def client_cli(name: str, home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A client's real CLI (pinned, scripts/client_cli.sh), with its own home (its configuration)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GENERALAGENT_", "ANTHROPIC_", "CLAUDE", "GEMINI", "GOOGLE"))}
    return subprocess.run([str(ROOT / "scripts" / "client_cli.sh"), name, *args], capture_output=True, text=True,
                          timeout=600, env=env | {"HOME": str(home)}, cwd=cwd, stdin=subprocess.DEVNULL)


def claude(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return client_cli("claude", home, cwd, *args)


def test_gemini_cli_connects_with_the_settings_shown(tmp_path: Path) -> None:
    """The JSON shown for Gemini CLI, as the project's .gemini/settings.json (placeholders filled in), in a folder
    the user trusted (README: say yes when asked): Gemini CLI's `mcp list` starts the server and reports it
    connected."""
    block = blocks("json")[-1]  # shown for Cursor and Gemini CLI
    page = first_page()
    assert page.index(".gemini/settings.json") < page.rindex(block)
    project, home = tmp_path / "project", tmp_path / "home"
    (project / ".gemini").mkdir(parents=True)
    (home / ".gemini").mkdir(parents=True)
    (project / ".gemini" / "settings.json").write_text(literal(block, project))
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
    listed = client_cli("gemini", home, project, "mcp", "list")
    line = next((x for x in (listed.stdout + listed.stderr).splitlines() if "generalagent:" in x), "")
    assert "Connected" in line, listed.stdout + listed.stderr


def test_the_claude_code_command_runs_as_printed_and_connects(tmp_path: Path) -> None:
    """README's `claude mcp add` line, run as printed in a project folder (the placeholder filled in) by Claude
    Code itself; `claude mcp get` then starts the server and reports it connected, with the root it was given.
    The old form (name after the variadic --env) is refused by the same CLI."""
    [block] = [b for b in blocks("sh") if "claude mcp add" in b]
    [command] = commands(block.replace("/ABS/PATH/generalagent-mcp", str(ROOT)))
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    argv = shlex.split(command.replace('"$PWD"', shlex.quote(str(project))))
    assert argv[:3] == ["claude", "mcp", "add"]
    added = claude(home, project, *argv[1:])
    assert added.returncode == 0, added.stdout + added.stderr
    got = claude(home, project, "mcp", "get", "generalagent")
    assert "Connected" in got.stdout and f"GENERALAGENT_ROOTS={project}" in got.stdout, got.stdout + got.stderr
    old = claude(home, project, "mcp", "add", "--transport", "stdio", "--env", "A=1", "other", "--", "/bin/true")
    assert old.returncode != 0


def literal(text: str, workspace: Path) -> str:
    return text.replace("/ABS/PATH/generalagent-mcp", str(ROOT)).replace("/ABS/PATH/your-documents", str(workspace))


def clean_env(data: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    return env | {"GENERALAGENT_DATA_DIR": str(data), "PATH": "/usr/bin:/bin"} | extra


@pytest.mark.anyio
async def test_every_client_configuration_answers_a_first_search(tmp_path: Path) -> None:
    """Each JSON configuration, with the placeholders filled in, starts the server as the client would (its
    command, args and env; VS Code's ${workspaceFolder} is the project folder) and answers a search."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    workspace = tmp_path / "your-documents"
    workspace.mkdir()
    (workspace / "budget.txt").write_text("The 2027 budget for the river project is 4.2 million.\n")
    configs = [json.loads(literal(b, workspace)) for b in blocks("json")]
    assert len(configs) == 3
    for k, config in enumerate(configs):
        [server] = (config.get("mcpServers") or config["servers"]).values()
        env = {key: value.replace("${workspaceFolder}", str(workspace)) for key, value in server["env"].items()}
        params = StdioServerParameters(command=server["command"], args=server["args"],
                                       env=clean_env(tmp_path / f"data{k}", **env), cwd=str(tmp_path))
        started = time.monotonic()
        with (tmp_path / f"stderr{k}.txt").open("w") as err:
            async with Client(stdio_client(params, errlog=err)) as client:
                indexed = await client.call_tool("index_path", {"path": "."})
                assert not indexed.is_error, indexed.content[0].text
                found = await client.call_tool("search_documents", {"query": "river project budget"})
        assert found.structured_content["hits"][0]["path"] == "budget.txt", found.content[0].text
        print(f"config {k}: first search answered {time.monotonic() - started:.1f} s after the start")


def test_the_printed_approval_command_runs(tmp_path: Path) -> None:
    [block] = [b for b in blocks("sh") if " approve " in b]
    [command] = commands(literal(block, tmp_path))
    done = subprocess.run(shlex.split(command), capture_output=True, text=True, timeout=120,
                          env=clean_env(tmp_path / "data"), cwd=tmp_path)
    assert "ap-7f3k2q" in done.stdout + done.stderr  # runs; there is no such approval here
    assert "Traceback" not in done.stderr and "command not found" not in done.stderr


def test_serve_sh_in_a_terminal_says_it_waits_for_a_client(tmp_path: Path) -> None:
    [quick] = [b for b in blocks("sh") if "serve.sh" in b]
    assert commands(quick)[0] == "./scripts/serve.sh"
    main, theirs = pty.openpty()
    process = subprocess.Popen([str(ROOT / "scripts" / "serve.sh")], stdin=theirs, stdout=theirs,
                               stderr=subprocess.PIPE, cwd=ROOT, env=clean_env(tmp_path / "data", PATH=os.environ["PATH"]),
                               start_new_session=True)
    os.close(theirs)
    try:
        said, deadline = b"", time.monotonic() + 300
        while b"waiting for an MCP client" not in said and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stderr], [], [], 1)
            if ready:
                chunk = os.read(process.stderr.fileno(), 4096)  # type: ignore[union-attr]
                if not chunk:
                    break
                said += chunk
        assert b"waiting for an MCP client" in said, said.decode(errors="replace")
        assert b"Connect a client" in said
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
        os.close(main)
