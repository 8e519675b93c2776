"""Secrets never reach the search index: what read_file has to ask for (the policy's secret paths, the
user's rules file included) is not indexed, not found by search_documents in any mode, and an index made
by an older version is cleaned up. Real files, the real SDK client in memory, both storage backends."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from foundation.errors import PathNotAllowed
from tests.approval_helpers import elicitation_answer
from tests.conftest import MODES, connect

pytestmark = [pytest.mark.anyio, pytest.mark.storage]

SECRET = "client_secret"
SEARCHES: list[dict[str, Any]] = [
    {"query": SECRET}, {"query": SECRET, "mode": "all"}, {"query": f'"{SECRET} value"', "mode": "phrase"},
    {"query": f'"{SECRET}"', "mode": "fts"}, {"query": r"client_secret value\s*=", "use_regex": True},
    {"query": SECRET, "group_by_document": True},
]


async def call(client: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content  # type: ignore[no-any-return]


async def found_paths(client: Any, **scope: Any) -> list[set[str]]:
    """The paths each search of SEARCHES returns (hits, or documents and all their chunks)."""
    out = []
    for args in SEARCHES:
        found = await call(client, "search_documents", {**args, **scope, "max_results": 50})
        paths = {h["path"] for h in found["hits"]}
        for doc in found.get("documents") or []:
            paths |= {doc["path"]} | {h["path"] for h in doc["matched_chunks"] + doc["context_chunks"]}
        out.append(paths)
    return out


def write(workspace: Path, rel: str, text: str | None = None) -> None:
    """A file whose text has SECRET (its own: `rel` is in it, unless `text` is given)."""
    path = workspace / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text or f"{SECRET} value = s3cr3t of {rel}\n", encoding="utf-8")


def project(workspace: Path) -> None:
    for rel in ["credentials.json", "config/Secrets.YAML", "deploy/secret.toml", "notes.md"]:
        write(workspace, rel)


@pytest.mark.parametrize("mode", MODES)
async def test_a_folder_is_indexed_without_its_secrets(make_settings: Any, workspace: Path, mode: str) -> None:
    project(workspace)
    async with connect(make_settings(search_memory_min_chunks=1), mode) as client:
        report = await call(client, "index_path", {"path": "."})
        assert report["indexed"] == 1 and report["secrets"] == 3 and not report["failed"]
        assert "3 files skipped as secrets" in report["note"]
        for paths in await found_paths(client):
            assert paths == {"notes.md"}
        status = (await call(client, "index_status", {"path": "."}))["path_status"]
        assert status["secrets"] == 3 and status["not_indexed"] == 0 and status["fresh"] is True
        again = await call(client, "index_path", {"path": "."})  # counted again, honestly, on every run
        assert again["unchanged"] == 1 and again["secrets"] == 3
        totals = await call(client, "index_status", {})
        assert totals["files"] == 1


async def test_an_explicit_secret_file_is_refused_with_the_fix(settings: Any, workspace: Path) -> None:
    project(workspace)
    async with connect(settings, elicitation_callback=elicitation_answer("accept")) as client:
        for rel in ["credentials.json", "config/Secrets.YAML"]:  # the gate asks (a secret); approved, still refused
            result = await client.call_tool("index_path", {"path": rel})
            assert result.is_error
            assert (f"{rel} looks like a secret (rule files.secret_read); it is not indexed. read_file asks the "
                    "user for it; the user can approve the read.") in result.content[0].text
            status = (await call(client, "index_status", {"path": rel}))["path_status"]
            assert status["indexed"] is False and "looks like a secret" in status["note"]
        assert (await call(client, "index_status", {}))["files"] == 0


async def test_what_read_file_does_with_a_skipped_secret_follows_its_rule(make_settings: Any, workspace: Path,
                                                                        data_dir: Path) -> None:
    """A secret store (a deny rule: here the user's) is one read_file refuses too, with nothing for the user to
    approve; a secret-looking file (an ask rule) is one read_file asks the user for. The refusal and the run's
    note say which (they said "read_file asks the user" of both)."""
    from mcp_server.cli_common import cli_runtime
    from tests.docgen import make_pdf
    from tools.documents import search_file
    from tools.index_tools import index_path
    from tools.runtime import CallContext

    (data_dir / "policy.toml").write_text("version = 1\n[secrets]\ndeny = ['(^|/)vault[^/]*$']\n")
    project(workspace)
    write(workspace, "stores/vault.md")
    write(workspace, "stores/vault-old.md")
    make_pdf(workspace / "vault.pdf", [[f"{SECRET} value"]])
    settings = make_settings()
    async with connect(settings) as client:
        report = await call(client, "index_path", {"path": "."})
        assert report["secrets"] == 6 and report["indexed"] == 1
        assert ("6 files skipped as secrets (keys, credentials, .env); not indexed. For 3 of them read_file asks "
                "the user for them; the user can approve the read. For the other 3 read_file refuses them too "
                "(secret stores); the user cannot approve reading them through the assistant.") in report["note"]
        only = await call(client, "index_path", {"path": "stores"})
        assert only["note"] == ("2 files skipped as secrets (keys, credentials, .env); not indexed. read_file "
                                "refuses them too (secret stores); the user cannot approve reading them through "
                                "the assistant.")
    rt = cli_runtime(settings)  # the tools alone, with the policy's secret paths (the gate refuses these before)
    try:
        for shown, tool in (
            ("stores/vault.md", lambda: index_path("stores/vault.md", rt=rt, call=CallContext(tool="index_path"))),
            ("vault.pdf", lambda: search_file("vault.pdf", SECRET, rt=rt, call=CallContext(tool="search_file"))),
        ):
            with pytest.raises(PathNotAllowed) as refused:
                tool()
            assert str(refused.value) == (f"{shown} looks like a secret (rule files.secret_denied); it is not "
                                          "indexed. read_file refuses it too (a secret store); the user cannot "
                                          "approve reading it through the assistant.")
    finally:
        rt.close()


def index_as_an_older_version(settings: Any) -> int:
    """Index the workspace with the tools alone, no policy handed down: what an older version did."""
    from tools.index_tools import index_path
    from tools.runtime import CallContext, Runtime

    older = Runtime(settings)
    try:
        return index_path(".", rt=older, call=CallContext(tool="index_path")).indexed
    finally:
        older.close()


@pytest.mark.parametrize("memory", [1, 10**6], ids=["postings", "database"])
async def test_secrets_indexed_before_are_never_found(make_settings: Any, workspace: Path, memory: int) -> None:
    """An older version indexed the secrets: searches never return them, and the first one that meets one
    forgets every indexed secret (the next index run would too)."""
    project(workspace)
    write(workspace, "other/credentials.json")
    settings = make_settings(search_memory_min_chunks=memory)
    assert index_as_an_older_version(settings) == 5
    async with connect(settings) as client:
        for paths in await found_paths(client, paths=["config", "notes.md", "deploy", "other"]):
            assert paths <= {"notes.md"}
        assert (await call(client, "index_status", {}))["files"] == 1
        for paths in await found_paths(client):
            assert paths == {"notes.md"}


async def test_a_secrets_twin_is_found_by_its_own_name(make_settings: Any, workspace: Path) -> None:
    """Files with equal bytes share one document: a copy under an ordinary name (read_file reads it without
    asking) is found under that name, never under the secret's."""
    twin = f"{SECRET} value = the same bytes\n"
    for rel in ["credentials.json", "Config/secrets.yml", "notes.md"]:
        write(workspace, rel, twin)
    settings = make_settings(search_memory_min_chunks=1)
    async with connect(settings) as client:
        assert (await call(client, "index_path", {"path": "."}))["secrets"] == 2
        for paths in await found_paths(client):
            assert paths == {"notes.md"}
        await call(client, "remove_from_index", {"path": "."})
    assert index_as_an_older_version(settings) == 3  # three paths, one document (equal bytes)
    async with connect(settings) as client:
        for paths in await found_paths(client):
            assert paths == {"notes.md"}


async def test_an_index_run_forgets_secrets_indexed_before(make_settings: Any, workspace: Path) -> None:
    project(workspace)
    write(workspace, "elsewhere/secret.json")
    index_as_an_older_version(make_settings())
    async with connect(make_settings()) as client:
        await call(client, "index_path", {"path": "config"})  # any run: every indexed secret is forgotten
        assert (await call(client, "index_status", {}))["files"] == 1
        report = await call(client, "index_path", {"path": "."})
        assert report["secrets"] == 4 and report["unchanged"] == 1


async def test_secret_patterns_of_the_users_rules_file_count(make_settings: Any, workspace: Path,
                                                             data_dir: Path) -> None:
    await only_the_readme_is_indexed(make_settings, workspace, data_dir, "(^|/)tokens[^/]*\\.md$", "docs/tokens-prod.md")


async def only_the_readme_is_indexed(make_settings: Any, workspace: Path, data_dir: Path, ask_pattern: str,
                                     secret: str) -> None:
    """With `ask_pattern` in the user's [secrets] ask list: docs/readme.md is indexed and found, `secret` is not."""
    (data_dir / "policy.toml").write_text(f"version = 1\n[secrets]\nask = ['{ask_pattern}']\n")
    write(workspace, secret)
    write(workspace, "docs/readme.md")
    async with connect(make_settings()) as client:
        report = await call(client, "index_path", {"path": "docs"})
        assert report["indexed"] == 1 and report["secrets"] == 1
        for paths in await found_paths(client):
            assert paths == {"docs/readme.md"}


async def test_a_symlink_to_a_secret_is_not_indexed(settings: Any, workspace: Path) -> None:
    write(workspace, "keys/credentials.json")
    (workspace / "keys" / "notes.txt").symlink_to(workspace / "keys" / "credentials.json")
    async with connect(settings) as client:
        report = await call(client, "index_path", {"path": "keys"})
        assert report["secrets"] == 2 and report["indexed"] == 0


def test_the_cli_and_the_server_hand_the_policy_down(settings: Any) -> None:
    """Every runtime the server side makes knows the secret paths (a Runtime without them indexes anything)."""
    from mcp_server.cli_common import cli_runtime
    from mcp_server.server import build_server

    _, dispatcher = build_server(settings)
    made = [dispatcher.runtime, cli_runtime(settings)]
    assert all(rt.secret_paths is not None for rt in made)
    assert made[0].secret_paths.rule(str(settings.roots[0] / "credentials.json"), settings.roots) == "files.secret_read"
    sources = [p for p in Path("mcp_server").rglob("*.py") if "Runtime(" in p.read_text(encoding="utf-8")]
    assert sorted(p.name for p in sources) == ["cli_common.py", "server.py"]  # the two above


# -- any spelling ---------------------------------------------------------------------------------------

SECRET_NAMES = ["credentials.json", "secret.json", "secrets.json", "secret.yaml", "secrets.yml", "secret.toml",
                "secrets.toml"]
HIDDEN_NAMES = [".env", ".env.local", ".env.json", ".env.production.yaml"]
FOLDERS = ["config", "Config", "deploy", "secrets", "Keys", "a b", "重要", "x.json"]


@st.composite
def spelled(draw: Any, names: list[str]) -> str:
    """A name with each letter in either case, in zero to two folders."""
    name = draw(st.sampled_from(names))
    flips = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
    name = "".join(c.upper() if up else c for c, up in zip(name, flips, strict=True))
    folders = draw(st.lists(st.sampled_from(FOLDERS), max_size=2))
    return "/".join([*folders, name])


_case = itertools.count()


@hsettings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secrets=st.lists(spelled(SECRET_NAMES), min_size=1, max_size=4, unique_by=str.lower),
       hidden=st.lists(spelled(HIDDEN_NAMES), max_size=2, unique_by=str.lower))
def test_no_spelling_of_a_secret_is_ever_found(settings: Any, workspace: Path, secrets: list[str],
                                               hidden: list[str]) -> None:
    """Whatever read_file has to ask for (or denies) as a secret, search_documents never returns, in any mode;
    the other files are found."""
    from policy import PolicyContext, decide, load_rules

    case = f"case{next(_case)}"
    rules = load_rules(None)
    context = PolicyContext(rules=rules, roots=(workspace,), read_only=True)

    def is_secret(rel: str) -> bool:
        return decide("read_file", {"path": rel}, context).rule_id.startswith("files.secret")

    names = [f"{case}/{rel}" for rel in [*secrets, *hidden]]
    assert all(is_secret(rel) for rel in names)  # the oracle agrees these are secrets
    for rel in [*names, f"{case}/notes.md"]:
        write(workspace, rel)

    async def run() -> None:
        async with connect(settings, elicitation_callback=elicitation_answer("accept")) as client:
            report = await call(client, "index_path", {"path": case})
            assert report["secrets"] == len(secrets) and report["indexed"] == 1  # hidden files are not walked
            for rel in names:
                result = await client.call_tool("index_path", {"path": rel})  # asked or denied; never indexed
                assert result.is_error
            for paths in await found_paths(client, paths=[case]):
                assert paths == {f"{case}/notes.md"}

    anyio.run(run)


def test_the_default_workspace_of_the_root_user_is_not_a_secret() -> None:
    """Run as root, the default workspace lies under /root, which the shipped `^/root` ask pattern covers: every
    file there was a secret, so nothing was indexed (and an index made before was emptied). The index's own
    check (the server's `PolicySecretPaths`) finds only what is a secret anywhere; /root's other files stay."""
    from mcp_server.secret_paths import PolicySecretPaths
    from policy import load_rules

    shipped = load_rules(None)
    secrets = PolicySecretPaths(lambda: shipped)
    root = Path("/root/.local/share/generalagent-mcp/workspaces/default")
    assert secrets.rule(f"{root}/notes/plan.md", (root,)) is None
    assert secrets.rule(f"{root}/credentials.json", (root,)) == "files.secret_read"
    assert secrets.rule(f"{root}/.env", (root,)) == "files.secret_denied"
    assert secrets.rule("/root/notes.md", (root,)) == "files.secret_read"
    assert secrets.rule("/root/notes.md", (Path("/root"),)) == "files.secret_read"  # root's home itself: asked
