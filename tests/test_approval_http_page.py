"""The local approval page: loopback only, never to a process the server runs (a sandboxed command),
Origin checked, CSRF token bound to the approval."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from starlette.testclient import TestClient

from foundation.calls import CallOrigin
from foundation.errors import ApprovalRequired
from mcp_server.server import build_server
from mcp_server.transports import http_app
from tests import approval_helpers as helpers

BASE = "http://127.0.0.1:8765"
CSRF = re.compile(r"name='csrf' value='([^']+)'")


@pytest.fixture
def served(settings: Any, monkeypatch: Any) -> Iterator[tuple[Any, Any, Any]]:
    """The page over real loopback HTTP; the client is the human's browser stand-in (httpx in this process)."""
    helpers.install(monkeypatch)
    server, dispatcher = build_server(settings)
    with helpers.page_client(settings, server) as client:
        yield server, dispatcher, client


def pending_id(dispatcher: Any, text: str = "web") -> str:
    import anyio

    async def call() -> str:
        try:
            await dispatcher.run("poke", {"text": text}, CallOrigin())
        except ApprovalRequired as exc:
            return str(exc).split("Approval id: ")[1].split()[0]
        raise AssertionError("expected ApprovalRequired")

    return anyio.run(call)


def run_poke(dispatcher: Any, text: str = "web") -> Any:
    import anyio

    return anyio.run(lambda: dispatcher.run("poke", {"text": text}, CallOrigin()))


def test_page_shows_the_call_and_approves_with_the_right_token(served: Any) -> None:
    _, dispatcher, client = served
    base = str(client.base_url).rstrip("/")
    approval_id = pending_id(dispatcher)
    page = client.get(f"/approvals/{approval_id}")
    assert page.status_code == 200 and "poke" in page.text and "&quot;text&quot;: &quot;web&quot;" in page.text
    assert page.headers["x-frame-options"] == "DENY" and "no-store" in page.headers["cache-control"]
    token = CSRF.search(page.text).group(1)  # type: ignore[union-attr]
    assert approval_id in client.get("/approvals").text
    done = client.post(f"/approvals/{approval_id}", data={"csrf": token, "decision": "approve"},
                       headers={"Origin": base})
    assert done.status_code == 200 and "approved" in done.text
    assert run_poke(dispatcher).model_dump() == {"text": "web"} and helpers.CALLS == ["web"]
    again = client.post(f"/approvals/{approval_id}", data={"csrf": token, "decision": "approve"})
    assert again.status_code == 409


def test_csrf_origin_and_loopback_are_enforced(served: Any, settings: Any) -> None:
    server, dispatcher, client = served
    approval_id = pending_id(dispatcher)
    other_id = pending_id(dispatcher, "other")
    token = CSRF.search(client.get(f"/approvals/{approval_id}").text).group(1)  # type: ignore[union-attr]
    other_token = CSRF.search(client.get(f"/approvals/{other_id}").text).group(1)  # type: ignore[union-attr]
    url = f"/approvals/{approval_id}"
    assert client.post(url, data={"decision": "approve"}).status_code == 403  # no token
    assert client.post(url, data={"csrf": "wrong", "decision": "approve"}).status_code == 403
    assert client.post(url, data={"csrf": other_token, "decision": "approve"}).status_code == 403  # bound per approval
    evil = client.post(url, data={"csrf": token, "decision": "approve"}, headers={"Origin": "http://evil.example"})
    assert evil.status_code == 403
    remote = TestClient(http_app(server, settings, "127.0.0.1"), base_url=BASE, client=("192.168.1.20", 4000))
    assert remote.get(url).status_code == 403
    assert remote.post(url, data={"csrf": token, "decision": "approve"}).status_code == 403
    rebinding = TestClient(http_app(server, settings, "127.0.0.1"), base_url="http://attacker.example:8765",
                           client=("127.0.0.1", 4000))
    assert rebinding.get(url).status_code == 403
    assert client.get("/approvals/ap-zzzzzz").status_code == 404
    no_socket = TestClient(http_app(server, settings, "127.0.0.1"), base_url=BASE, client=("127.0.0.1", 4000),
                           cookies=helpers.page_cookie(settings))
    unknown = no_socket.get(url)  # loopback by its address, but no connection behind it to look up: refused
    assert unknown.status_code == 403 and "approve --list" in unknown.text  # (the data dir's path may say "csrf")
    assert "name='csrf'" not in unknown.text and token not in unknown.text
    assert no_socket.post(url, data={"csrf": token, "decision": "approve"}).status_code == 403
    assert helpers.CALLS == []
    with pytest.raises(ApprovalRequired):
        run_poke(dispatcher)
    rejected = client.post(url, data={"csrf": token, "decision": "reject"})
    assert rejected.status_code == 200 and "rejected" in rejected.text
    with pytest.raises(ApprovalRequired):
        run_poke(dispatcher)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_over_real_http_the_result_names_the_page(settings: Any, monkeypatch: Any, mode: str) -> None:
    from mcp.client import Client

    helpers.install(monkeypatch)
    with helpers.real_http_server(settings) as (server, port):
        async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode) as client:
            await client.list_tools()
            result = await client.call_tool("poke", {"text": "http"})
            text = result.content[0].text
            match = re.search(r"http://127\.0\.0\.1:\d+/approvals/(ap-[a-z2-9]{6})", text)
            assert result.is_error and match, text
            approval_id = match.group(1)
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", cookies=helpers.page_cookie(settings)) as page_client:
                page = page_client.get(f"/approvals/{approval_id}")
                token = CSRF.search(page.text).group(1)  # type: ignore[union-attr]
                assert page_client.post(f"/approvals/{approval_id}",
                                        data={"csrf": token, "decision": "approve"}).status_code == 200
            ok = await client.call_tool("poke", {"text": "http"})
            assert not ok.is_error and helpers.CALLS == ["http"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_elicitation_over_real_http(settings: Any, monkeypatch: Any, mode: str, action: str) -> None:
    from mcp.client import Client

    helpers.install(monkeypatch)
    seen: list[str] = []
    with helpers.real_http_server(settings) as (_, port):
        async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode,
                          elicitation_callback=helpers.elicitation_answer(action, seen=seen)) as client:
            await client.list_tools()
            result = await client.call_tool("poke", {"text": "over-http"})
    assert len(seen) == 1
    if action == "accept":
        assert not result.is_error and helpers.CALLS == ["over-http"]
    else:
        assert result.is_error and "did not approve" in result.content[0].text and helpers.CALLS == []


SELF_APPROVE = """
import sys, urllib.error, urllib.parse, urllib.request
base, approval_id, token = sys.argv[1:4]
def ask(url, data=None):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=20) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
for name, (status, text) in [
        ("list", ask(base + "/approvals")), ("page", ask(base + "/approvals/" + approval_id)),
        ("post", ask(base + "/approvals/" + approval_id,
                     urllib.parse.urlencode({"csrf": token, "decision": "approve"}).encode()))]:
    print(name, status, approval_id in text, token in text, "outside the sandbox" in text)
"""


@pytest.mark.anyio
async def test_a_sandboxed_command_cannot_read_or_decide_approvals(make_settings: Any, monkeypatch: Any,
                                                                   workspace: Path, data_dir: Path) -> None:
    """The red team's self-approval: with the network shared into the sandbox, a command the user allowed
    (`python3 approve.py`) reached the page on 127.0.0.1, read the CSRF token and approved the held call.
    Now the page refuses it (even holding the token), the call stays held, and the human's client on this
    computer still approves it; the approvals database is not in the sandbox either."""
    from mcp.client import Client

    from tests.conftest import require_os_sandbox
    from tools.bash import run_bash_command
    from tools.runtime import CallContext

    require_os_sandbox()
    helpers.install(monkeypatch)
    settings = make_settings(bash_enabled=True, bash_network=True)
    (workspace / "approve.py").write_text(SELF_APPROVE)
    server, dispatcher = build_server(settings)
    with helpers.page_client(settings, server) as page:
        base = str(page.base_url).rstrip("/")
        async with Client(f"{base}/mcp", mode="legacy") as client:
            held = await client.call_tool("poke", {"text": "hook"})
            assert held.is_error
            approval_id = re.search(r"ap-[a-z2-9]{6}", held.content[0].text).group(0)  # type: ignore[union-attr]
            token = CSRF.search(page.get(f"/approvals/{approval_id}").text).group(1)  # type: ignore[union-attr]

            def sandboxed(command: str) -> Any:
                return run_bash_command(command, timeout=60, rt=server.runtime,
                                        call=CallContext(tool="run_bash_command"))

            import anyio

            result = await anyio.to_thread.run_sync(
                sandboxed, f"python3 approve.py {base} {approval_id} {token}")  # the system's: /tmp is the sandbox's own
            lines = result.stdout.split("\n")  # (issue 30: the command's own network namespace reaches no
            # address of this computer: refused, or not even connected)
            assert lines[:3] == ["list 403 False False True", "page 403 False False True",
                                 "post 403 False False True"] or "Connection refused" in result.stderr, result
            assert settings.database_url or (data_dir / "approvals.sqlite3").is_file()
            listed = await anyio.to_thread.run_sync(sandboxed, f"ls -A {data_dir}")  # the data dir is hidden
            assert listed.stdout == "", listed
            if not Path(sys.prefix).is_relative_to("/tmp"):  # a venv in /tmp is not seen (the sandbox has its own /tmp)
                cli = await anyio.to_thread.run_sync(  # the approvals database is hidden: the CLI finds nothing
                    sandboxed, f"GENERALAGENT_DATA_DIR={data_dir} {sys.executable} -m mcp_server "
                               f"approve {approval_id} < /dev/null")
                assert cli.stdout == "" and cli.exit_code, cli  # (the server's own python is not in the sandbox)
            assert helpers.CALLS == []
            still = await client.call_tool("poke", {"text": "hook"})
            assert still.is_error and helpers.CALLS == []
            done = page.post(f"/approvals/{approval_id}", data={"csrf": token, "decision": "approve"})
            assert done.status_code == 200 and "approved" in done.text
            ok = await client.call_tool("poke", {"text": "hook"})
            assert not ok.is_error and helpers.CALLS == ["hook"]


def test_the_page_needs_its_key_which_no_tool_result_carries(settings: Any, monkeypatch: Any) -> None:
    """Issue 30, finding 4: through a local TCP relay the page sees the relay (a process outside the server's
    tree) as its peer, and approved for anyone who could reach it. Now a request without the page's key is
    refused, whatever its peer and even holding the CSRF token; the key comes from the address the person is
    given (a terminal), is kept in a cookie, and appears in no tool result."""
    import httpx2 as httpx

    from mcp_server.approval_keys import KEY_FILE, page_key

    helpers.install(monkeypatch)
    server, dispatcher = build_server(settings)
    with helpers.real_http_server(settings, server) as (_, port):
        base = f"http://127.0.0.1:{port}"
        approval_id = pending_id(dispatcher)
        with httpx.Client(base_url=base, cookies=helpers.page_cookie(settings)) as person:
            assert approval_id in person.get("/approvals").text
            token = CSRF.search(person.get(f"/approvals/{approval_id}").text).group(1)  # type: ignore[union-attr]
        with httpx.Client(base_url=base) as relay:  # an outside peer without the key: a relay's stand-in
            for answer in (relay.get("/approvals"), relay.get(f"/approvals/{approval_id}"),
                           relay.post(f"/approvals/{approval_id}", data={"csrf": token, "decision": "approve"}),
                           relay.get(f"/approvals/{approval_id}?key=wrong"),
                           relay.get("/approvals", cookies={"generalagent_approvals": "x" * 43})):
                assert answer.status_code == 403 and approval_id not in answer.text and "approve --list" in answer.text
        with pytest.raises(ApprovalRequired) as held:
            run_poke(dispatcher)
        assert page_key(settings.data_dir) not in str(held.value)
        assert (settings.data_dir / KEY_FILE).stat().st_mode & 0o077 == 0
        with httpx.Client(base_url=base) as browser:  # the person opens the keyed address once
            opened = browser.get(f"/approvals?key={page_key(settings.data_dir)}", follow_redirects=True)
            assert opened.status_code == 200 and approval_id in opened.text and "key=" not in str(opened.url)
            page = browser.get(f"/approvals/{approval_id}")
            token = CSRF.search(page.text).group(1)  # type: ignore[union-attr]
            done = browser.post(f"/approvals/{approval_id}", data={"csrf": token, "decision": "approve"})
            assert done.status_code == 200 and "approved" in done.text
    assert run_poke(dispatcher).model_dump() == {"text": "web"}
