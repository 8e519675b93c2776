"""Secret stores found by shape, not only by name (issue 30, finding 5): every history file, MCP client
configurations (which hold this server's GENERALAGENT_* keys), database/cloud/tool credentials, keyrings and
/etc/(g)shadow are denied to read_file and to shell commands; ordinary project files like them are not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy import PolicyContext, decide, load_rules
from tests.conftest import connect

RULES = load_rules(None)
ROOT = Path("/srv/ws")
READ = PolicyContext(rules=RULES, roots=(ROOT,), read_only=True)
SHELL = PolicyContext(rules=RULES, roots=(ROOT,), read_only=False)

STORES = [".cursor/mcp.json", ".vscode/mcp.json", "/home/u/.config/Claude/claude_desktop_config.json",
          "/Users/u/Library/Application Support/Claude/claude_desktop_config.json", "/root/.claude.json",
          ".windsurf/mcp_config.json", "/home/u/.codeium/windsurf/mcp_config.json", "/home/u/.gemini/settings.json",
          "/home/u/.codex/config.toml", ".my.cnf", "/root/.mylogin.cnf", ".pgpass", ".s3cfg", "/root/.terraformrc",
          "/root/.terraform.d/credentials.tfrc.json", "/root/.config/rclone/rclone.conf", "/root/.boto",
          "/root/.local/share/keyrings/login.keyring", "/etc/shadow", "/etc/gshadow", "/root/.authinfo.gpg",
          "/home/u/.local/share/fish/fish_history", ".bash_history", "/root/.zsh_history", ".psql_history",
          ".mysql_history", ".python_history", ".node_repl_history", ".sqlite_history", ".zhistory", ".histfile"]
ORDINARY = ["history.md", "docs/history.txt", "src/history.py", "mcp_server/server.py", "server.json",
            "notes/mcp-servers.md", "test_mcp.py", ".vscode/settings.json", "CHANGELOG.md", "src/my.cnf.example.md",
            "docs/shell_history_tips.md", "mcpb.json", "manifest.json"]


@pytest.mark.parametrize("path", STORES)
def test_secret_stores_are_denied_to_read_file_and_shell(path: str) -> None:
    assert decide("read_file", {"path": path}, READ).action == "deny", path
    assert decide("run_bash_command", {"command": f"cat '{path}'"}, SHELL).action == "deny", path


@pytest.mark.parametrize("path", ORDINARY)
def test_project_files_of_similar_names_stay_readable(path: str) -> None:
    assert decide("read_file", {"path": path}, READ).action == "allow", path


NAME = st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True)
FOLDER = st.sampled_from(["", "/root/", "/home/ann/", "sub/", ".config/app/", "/srv/ws/"])


@settings(max_examples=300, deadline=None)
@given(folder=FOLDER, program=NAME, copy=st.sampled_from(["", "~", ".bak", "-old", "_1"]))
def test_every_history_file_is_a_secret_store(folder: str, program: str, copy: str) -> None:
    """Any program's history (`.<program>_history`, `.<program>history`), wherever, and its copies."""
    for name in (f".{program}_history", f".{program}history"):
        assert decide("read_file", {"path": f"{folder}{name}{copy}"}, READ).action == "deny", name


@settings(max_examples=200, deadline=None)
@given(folder=st.sampled_from([".cursor/", ".vscode/", ".windsurf/", "", "/home/ann/.config/x/", ".idea/"]),
       stem=st.sampled_from(["mcp", ".mcp", "mcp_config", "mcp-servers", "mcp.config", "mcp_settings"]),
       ext=st.sampled_from(["json", "jsonc", "yaml", "yml", "toml"]))
def test_every_mcp_client_configuration_is_a_secret_store(folder: str, stem: str, ext: str) -> None:
    assert decide("read_file", {"path": f"{folder}{stem}.{ext}"}, READ).action == "deny"


@pytest.mark.anyio
async def test_an_mcp_client_config_with_our_key_is_not_readable_through_the_client(make_settings: Any,
                                                                                  workspace: Path) -> None:
    """End to end: before, read_file and `cat` printed the client config holding GENERALAGENT_LLM_API_KEY."""
    (workspace / ".cursor").mkdir()
    (workspace / ".cursor" / "mcp.json").write_text('{"env": {"GENERALAGENT_LLM_API_KEY": "sk-KEYMARKER"}}')
    (workspace / ".psql_history").write_text("\\password KEYMARKER\n")
    async with connect(make_settings(bash_enabled=True)) as client:
        for call in (("read_file", {"path": ".cursor/mcp.json"}), ("read_file", {"path": ".psql_history"}),
                     ("run_bash_command", {"command": "cat .cursor/mcp.json"}),
                     ("run_bash_command", {"command": "head .psql_history"})):
            result = await client.call_tool(*call)
            text = " ".join(getattr(c, "text", "") for c in result.content)
            assert result.is_error and "KEYMARKER" not in text and "secret" in text, (call, text)
