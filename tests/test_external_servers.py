"""Sub-agents using other MCP servers' tools: a real MCP server process written for the test
(tests/external_mcp_server.py) over stdio and over Streamable HTTP on 127.0.0.1, called by a sub-agent
whose model is the scripted endpoint (tests/fake_llm.py), through our dispatch point and approval gate.

The machine may be loaded: starting the test server's Python takes seconds, so the timeouts here are
generous except where a timeout is what is tested."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from foundation.errors import SettingsError
from tests import approval_helpers as helpers
from tests.fake_llm import FakeLLM, fake_llm  # noqa: F401  (fixture)
from tests.test_delegate import allow_tools, client_for

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).resolve().parent / "external_mcp_server.py"
LONG = "The other server says the capital of France is Paris and the answer is 42. " * 4


def write_servers(data_dir: Path, **servers: dict[str, Any]) -> None:
    lines = []
    for name, table in servers.items():
        lines.append(f"[servers.{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in table.items()]
    (data_dir / "mcp_servers.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def stdio_server(*flags: str, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVER), *flags], "start_timeout_seconds": 120,
            "call_timeout_seconds": 60} | extra


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]


@pytest.fixture
def calls_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "external-calls.txt"
    monkeypatch.setenv("EXTERNAL_CALLS_FILE", str(path))  # the stdio server inherits it through `env`
    return path


def ran(calls_file: Path) -> list[str]:
    return calls_file.read_text().splitlines() if calls_file.exists() else []


async def test_a_subagent_calls_a_stdio_servers_tools(make_settings: Any, fake_llm: FakeLLM, data_dir: Path,  # noqa: F811
                                                      calls_file: Path) -> None:
    write_servers(data_dir, ext=stdio_server(env={"EXTERNAL_CALLS_FILE": str(calls_file)}))
    allow_tools(data_dir, "delegate_task", "ext__*")
    fake_llm.reply_tool_calls([("ext__lookup", {"key": "capital-of-france"}), ("ext__big", {}),
                               ("ext__broken", {}), ("ext__lookup", {})])
    fake_llm.reply_text(LONG)
    fake_llm.reply_text("Continued: " + LONG)
    fake_llm.reply_text("Again: " + LONG)
    settings = make_settings(**fake_llm.settings_overrides())
    async with client_for(settings) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "What is the capital of France?",
                                                          "mcp_servers": ["ext"]})
        context_id = result.structured_content["context_id"]
        more = await client.call_tool("delegate_task", {"task": "And of Spain?", "continue_id": context_id})
        (data_dir / "mcp_servers.toml").write_text("")  # the server is no longer configured
        again = await client.call_tool("delegate_task", {"task": "And of Italy?", "continue_id": context_id})
    assert not result.is_error, result.content
    assert "ext__lookup" in tool_names(fake_llm.requests[2]) and not more.is_error  # a saved thread gets them again
    assert not again.is_error and again.structured_content["notes"] == [
        "No MCP server 'ext'. Configured servers: none (configure them in " + str(data_dir / "mcp_servers.toml") + ")."]
    assert "ext__lookup" not in tool_names(fake_llm.requests[3])
    assert result.structured_content["result"] == LONG.strip()
    first, second = fake_llm.requests[:2]
    offered = tool_names(first)
    assert {"ext__lookup", "ext__shout", "ext__big", "ext__hang"} <= set(offered) and "search_documents" in offered
    lookup = next(t for t in first["tools"] if t["function"]["name"] == "ext__lookup")["function"]
    assert lookup["description"] == "Look a fact up by its key." and "key" in lookup["parameters"]["properties"]
    assert "ext__lookup" in first["messages"][0]["content"]  # the system prompt lists it
    found, big, broken, missing = tool_results(second)
    assert '"content":"Paris"' in found.replace(" ", "") and '"server":"ext"' in found.replace(" ", "")
    assert '"structured":null' in found.replace(" ", "")  # the SDK's {"result": text} is not sent twice
    assert len(big) < 4000 * 4 + 500  # bounded like our own results
    assert broken.startswith("Error: ext__broken failed:"), broken
    assert missing.startswith("Error: Invalid arguments for ext__lookup") and "'key' is required" in missing
    assert ran(calls_file) == ["lookup capital-of-france"]


async def test_an_unknown_servers_tool_asks_the_human(make_settings: Any, fake_llm: FakeLLM, data_dir: Path,  # noqa: F811
                                                      calls_file: Path) -> None:
    write_servers(data_dir, ext=stdio_server(env={"EXTERNAL_CALLS_FILE": str(calls_file)}))
    allow_tools(data_dir, "delegate_task")  # nothing names ext__*: its tools ask, even read-only-looking ones
    fake_llm.reply_tool_calls([("ext__lookup", {"key": "answer"})])
    fake_llm.reply_tool_calls([("ext__shout", {"text": "refused"})])
    fake_llm.reply_text(LONG)
    seen: list[str] = []
    answers = iter(["accept", "decline"])

    async def answer(context: Any, params: Any) -> Any:
        return await helpers.elicitation_answer(next(answers), seen=seen)(context, params)

    settings = make_settings(**fake_llm.settings_overrides())
    async with client_for(settings, elicitation_callback=answer) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "Find the answer.", "mcp_servers": ["ext"]})
    assert not result.is_error, result.content
    assert len(seen) == 2 and "ext__lookup" in seen[0] and "ext__shout" in seen[1]
    assert "(rule default.ask[0])" in seen[0]  # the shipped ask for other servers' tools
    assert ran(calls_file) == ["lookup answer"]  # the declined call never reached the other server
    declined = tool_results(fake_llm.requests[2])[-1]
    assert declined.startswith("Error:") and "ext__shout" in " ".join(result.structured_content["notes"])


async def test_a_users_deny_wins_over_their_allow_for_a_server(make_settings: Any, fake_llm: FakeLLM,  # noqa: F811
                                                                data_dir: Path, calls_file: Path) -> None:
    write_servers(data_dir, ext=stdio_server(env={"EXTERNAL_CALLS_FILE": str(calls_file)}))
    (data_dir / "policy.toml").write_text('version = 1\n[permissions]\nallow = ["delegate_task", "ext__*"]\n'
                                          'deny = ["ext__shout"]\n')
    fake_llm.reply_tool_calls([("ext__shout", {"text": "refused"}), ("ext__lookup", {"key": "answer"})])
    fake_llm.reply_text(LONG)
    seen: list[str] = []
    settings = make_settings(**fake_llm.settings_overrides())
    async with client_for(settings, elicitation_callback=helpers.elicitation_answer("accept", seen=seen)) as (
            client, _):
        result = await client.call_tool("delegate_task", {"task": "Find the answer.", "mcp_servers": ["ext"]})
    assert not result.is_error, result.content
    assert seen == [] and ran(calls_file) == ["lookup answer"]  # nothing asked; the denied call never ran
    denied, found = tool_results(fake_llm.requests[1])
    assert denied.startswith("Error: Denied by policy (user.deny[0]") and '"content":"42"' in found


async def test_a_crashing_and_a_hanging_server_are_errors_not_a_stuck_subagent(
        make_settings: Any, fake_llm: FakeLLM, data_dir: Path, calls_file: Path) -> None:  # noqa: F811
    write_servers(data_dir, ext=stdio_server(env={"EXTERNAL_CALLS_FILE": str(calls_file)}, call_timeout_seconds=8))
    allow_tools(data_dir, "delegate_task", "ext__*")
    fake_llm.reply_tool_calls([("ext__crash", {})])
    fake_llm.reply_tool_calls([("ext__hang", {})])
    fake_llm.reply_tool_calls([("ext__lookup", {"key": "answer"})])
    fake_llm.reply_text(LONG)
    settings = make_settings(**fake_llm.settings_overrides())
    async with client_for(settings) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "Try the tools.", "mcp_servers": ["ext"]})
    assert not result.is_error, result.content
    crashed = tool_results(fake_llm.requests[1])[-1]
    hung = tool_results(fake_llm.requests[2])[-1]
    after = tool_results(fake_llm.requests[3])[-1]
    assert crashed.startswith("Error: MCP server 'ext' stopped while running crash"), crashed
    assert "started again on the next call" in crashed
    assert hung.startswith("Error: ext__hang did not answer within 8 s (call_timeout_seconds of [servers.ext])"), hung
    assert '"content":"42"' in after.replace(" ", "")  # restarted after each failure
    assert ran(calls_file) == ["crash", "hang", "lookup answer"]


async def test_servers_that_do_not_start_are_named_to_the_subagent(make_settings: Any, fake_llm: FakeLLM,  # noqa: F811
                                                                   data_dir: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    write_servers(data_dir, bad=stdio_server("--fail-start"), slow=stdio_server("--hang-start", start_timeout_seconds=3),
                  gone={"command": "/no/such/program"}, down={"url": closed})
    allow_tools(data_dir, "delegate_task")
    fake_llm.reply_text(LONG)
    settings = make_settings(**fake_llm.settings_overrides())
    async with client_for(settings) as (client, _):
        started = time.monotonic()
        result = await client.call_tool("delegate_task", {"task": "Use them.",
                                                          "mcp_servers": ["bad", "slow", "gone", "down"]})
        waited = time.monotonic() - started
        unknown = await client.call_tool("delegate_task", {"task": "Use it.", "mcp_servers": ["nosuch"]})
        listed = await client.call_tool("list_agents", {})
    assert listed.structured_content["mcp_servers"] == ["bad", "down", "gone", "slow"]
    assert not result.is_error, result.content
    notes = result.structured_content["notes"]
    assert notes[0].startswith("MCP server 'bad' did not start: it closed the connection before answering")
    assert "Its last error output: external-test: cannot open its database (simulated)" in notes[0]
    assert notes[1].startswith("MCP server 'slow' did not start within 3 s (start_timeout_seconds of [servers.slow]")
    assert notes[2].startswith("MCP server 'gone' did not start: program not found (/no/such/program)")
    assert notes[3].startswith(f"MCP server 'down' did not start: cannot connect to {closed} (")
    assert waited < 60  # the hanging one cost its start timeout, not the sub-agent's
    task = fake_llm.requests[0]["messages"][1]["content"]
    assert "Unavailable: MCP server 'bad'" in task and not any("bad__" in n for n in tool_names(fake_llm.requests[0]))
    assert unknown.is_error and "No MCP server 'nosuch'. Configured servers: bad, down, gone, slow." in unknown.content[0].text


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server(tmp_path: Path) -> Any:
    port = free_port()
    log = (tmp_path / "http-server.log").open("w")
    process = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)], stdout=log, stderr=log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(10)
    log.close()


async def test_a_subagent_calls_a_streamable_http_servers_tool(make_settings: Any, fake_llm: FakeLLM,  # noqa: F811
                                                               data_dir: Path, http_server: str) -> None:
    write_servers(data_dir, web={"url": http_server, "headers": {"X-Test": "yes"}, "start_timeout_seconds": 60})
    (data_dir / "agents.toml").write_text('[agents.loud]\ndescription = "Shouts."\nmcp_servers = ["web"]\n'
                                          'tools = ["now"]\n')
    allow_tools(data_dir, "delegate_task", "web__shout")
    fake_llm.reply_tool_calls([("web__shout", {"text": "over http"})])
    fake_llm.reply_text(LONG)
    settings = make_settings(**fake_llm.settings_overrides())
    async with client_for(settings) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "Shout it.", "agent": "loud"})
        status = await client.call_tool("delegate_status", {"context_id": result.structured_content["context_id"]})
    assert not result.is_error, result.content
    assert "now" in tool_names(fake_llm.requests[0]) and "web__shout" in tool_names(fake_llm.requests[0])
    assert '"content":"OVERHTTP"' in tool_results(fake_llm.requests[1])[0].replace(" ", "")
    assert "web__shout" in status.structured_content["tools"]


async def test_idle_servers_stop_and_restart_on_use(make_settings: Any, data_dir: Path) -> None:
    from mcp_server.external import ExternalServers

    write_servers(data_dir, ext=stdio_server())
    servers = ExternalServers(make_settings(mcp_server_idle_seconds=1))
    try:
        specs = {spec.name: spec for spec in await servers.tools("ext")}
        connection = servers._connections["ext"]
        thread = connection._thread
        assert thread is not None and thread.is_alive()
        with anyio.fail_after(60):
            while thread.is_alive():  # idle for 1 s: stopped (its process too)
                await anyio.sleep(0.2)
        result = await specs["ext__shout"].fn(text="again")
        assert result.content == "AGAIN" and connection._thread is not thread
    finally:
        await anyio.to_thread.run_sync(servers.close)


def test_doctor_lists_servers_and_whether_each_starts(make_settings: Any, data_dir: Path) -> None:
    from mcp_server.cmd_doctor import check_mcp_servers

    assert check_mcp_servers(make_settings()).detail.startswith("none configured")
    write_servers(data_dir, ext=stdio_server(), gone={"command": "/no/such/program"})
    check = check_mcp_servers(make_settings())
    assert not check.ok and not check.required
    ext, gone = check.detail.split("\n    ")
    assert ext.startswith("ext (stdio: ") and ": starts, 7 tools (ext__lookup, ext__shout," in ext
    assert gone.startswith("gone (stdio: /no/such/program): FAILS: MCP server 'gone' did not start: program not found")


@pytest.mark.parametrize(("text", "problem"), [
    ('[servers.a]\nurl = "http://x/mcp"\ncommand = "y"\n', "exactly one of command"),
    ('[servers.a]\nargs = []\n', "exactly one of command"),
    ('[servers."a__b"]\ncommand = "x"\n', "server name 'a__b'"),
    ('[servers.a]\ncommand = "x"\nport = 3\n', "port: Extra inputs are not permitted"),
    ('[servers.a]\nurl = "ftp://x"\n', "url: String should match pattern"),
    ('servers = 3\n', "'servers' must be tables"),
    ('[other]\n', "unknown key 'other'"),
])
def test_bad_config_files_name_the_problem(make_settings: Any, data_dir: Path, text: str, problem: str) -> None:
    from tools.mcp_servers import load_servers

    (data_dir / "mcp_servers.toml").write_text(text)
    with pytest.raises(SettingsError, match="mcp_servers.toml") as info:
        load_servers(make_settings())
    assert problem in str(info.value)


@hsettings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=8), st.one_of(
    st.text(max_size=10), st.integers(), st.booleans(), st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2)), max_size=6))
def test_any_table_loads_or_names_its_problem(tmp_path_factory: Any, table: dict[str, Any]) -> None:
    from tools.mcp_servers import _server

    try:
        config = _server(Path("mcp_servers.toml"), "srv", table)
    except SettingsError as exc:
        assert str(exc).startswith("mcp_servers.toml: [servers.srv]")
    else:
        assert (config.command is None) != (config.url is None)


async def test_the_other_server_ends_when_our_server_process_exits(tmp_path: Path, fake_llm: FakeLLM) -> None:  # noqa: F811
    """Our console script over stdio starts the other server for a sub-agent; when our process ends (its
    client closes stdin), so does the other one."""
    import os

    from mcp.client import Client
    from mcp.client.stdio import stdio_client

    from tests.fake_llm import MODEL
    from tests.test_stdio import stdio_params

    data = tmp_path / "data"
    data.mkdir()
    write_servers(data, ext=stdio_server())
    allow_tools(data, "delegate_task", "ext__pid")
    fake_llm.reply_tool_calls([("ext__pid", {})])
    fake_llm.reply_text(LONG)
    params = stdio_params(tmp_path, GENERALAGENT_LLM_BASE_URL=fake_llm.base_url, GENERALAGENT_LLM_MODEL=MODEL,
                          GENERALAGENT_LLM_API_KEY="test-key", GENERALAGENT_TOOL_PROFILE="full")
    with (tmp_path / "stderr.txt").open("w") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy") as client:
            result = await client.call_tool("delegate_task", {"task": "Which pid?", "mcp_servers": ["ext"]})
            assert not result.is_error, result.content
    answer = tool_results(fake_llm.requests[1])[0].replace(" ", "")
    pid = int(answer.split('"content":"')[1].split('"')[0])

    def alive() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    with anyio.fail_after(60):
        while alive():
            await anyio.sleep(0.2)


async def test_two_users_at_once_share_one_server_process(make_settings: Any, data_dir: Path) -> None:
    from mcp_server.external import ExternalServers

    write_servers(data_dir, ext=stdio_server())
    servers = ExternalServers(make_settings())
    try:
        found: list[Any] = []

        async def use() -> None:
            specs = {spec.name: spec for spec in await servers.tools("ext")}
            found.append((await specs["ext__pid"].fn()).content)

        async with anyio.create_task_group() as group:
            group.start_soon(use)
            group.start_soon(use)
        assert len(found) == 2 and found[0] == found[1]  # one process answered both
    finally:
        await anyio.to_thread.run_sync(servers.close)


async def test_a_handoff_gives_the_new_agent_its_servers_tools(make_settings: Any, fake_llm: FakeLLM,  # noqa: F811
                                                               data_dir: Path) -> None:
    write_servers(data_dir, ext=stdio_server())
    (data_dir / "agents.toml").write_text('[agents.triage]\ndescription = "Routes."\ntools = ["now"]\n\n'
                                          '[agents.facts]\ndescription = "Knows facts."\ntools = ["now"]\n'
                                          'mcp_servers = ["ext"]\n')
    allow_tools(data_dir, "delegate_task", "ext__*")
    fake_llm.reply_tool_calls([("transfer_to_facts", {"note": "needs the fact table"})])
    fake_llm.reply_tool_calls([("ext__lookup", {"key": "answer"})])
    fake_llm.reply_text(LONG)
    async with client_for(make_settings(**fake_llm.settings_overrides())) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "What is the answer?", "agent": "triage"})
    assert not result.is_error, result.content
    assert result.structured_content["handoffs"] == ["facts"]
    assert "ext__lookup" not in tool_names(fake_llm.requests[0]) and "ext__lookup" in tool_names(fake_llm.requests[1])
    assert '"content":"42"' in tool_results(fake_llm.requests[2])[-1].replace(" ", "")
