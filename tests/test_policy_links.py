"""The policy reads paths as written; the gate also decides a call's path arguments as resolved when a
symlink in the roots changes them, and the stricter verdict wins: a link to `id_rsa` or into `.ssh` is read
as what it leads to, a link to an ordinary file stays allowed (random link chains, through the MCP client)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundation.calls import CallOrigin
from mcp_server.approval.gate import PolicyGate
from mcp_server.registry import TOOLS
from tests.conftest import connect

READ = next(spec for spec in TOOLS if spec.name == "read_file")
WRITE = next(spec for spec in TOOLS if spec.name == "write_file")
TARGETS = {"id_rsa": "deny", ".env": "deny", ".ssh/config": "deny", "notes.txt": "allow", "docs/a.md": "allow",
           "credentials.json": "ask"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(sorted(TARGETS)), hops=st.integers(1, 3), via_folder=st.booleans(),
       absolute=st.booleans())
def test_a_link_is_decided_as_what_it_leads_to(make_settings: Any, tmp_path_factory: Any, target: str, hops: int,
                                               via_folder: bool, absolute: bool) -> None:
    root = Path(os.path.realpath(tmp_path_factory.mktemp("links")))
    for name in TARGETS:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")
    if via_folder and "/" in target:  # a link to the folder, then the file's name under it
        folder, name = target.split("/")
        (root / "dirlink").symlink_to(root / folder)
        path = f"dirlink/{name}"
    else:
        previous = target
        for hop in range(hops):
            (root / f"l{hop}").symlink_to(previous)
            previous = f"l{hop}"
        path = previous
    gate = PolicyGate(make_settings(roots=[root]))
    asked = str(root / path) if absolute else path
    assert gate.verdict(READ, {"path": asked}, CallOrigin()).action == TARGETS[target], (path, target)


def test_writing_through_a_link_into_git_asks(make_settings: Any, workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n")
    (workspace / "notes.txt").symlink_to(".git/config")
    gate = PolicyGate(make_settings())
    through = gate.verdict(WRITE, {"path": "notes.txt", "content": "x"}, CallOrigin())
    assert (through.action, through.rule_id) == ("ask", "files.exec_config") and "symlink" in through.reason
    assert gate.verdict(WRITE, {"path": "plain.txt", "content": "x"}, CallOrigin()).rule_id == "default.ask"


@pytest.mark.anyio
async def test_read_file_through_a_link_to_a_secret_is_refused(make_settings: Any, workspace: Path) -> None:
    (workspace / "id_rsa").write_text("PRIVATE-KEY-MARKER")
    (workspace / "link.txt").symlink_to("id_rsa")
    async with connect(make_settings()) as client:
        refused = await client.call_tool("read_file", {"path": "link.txt"})
    assert refused.is_error and "files.secret_denied" in refused.content[0].text and "symlink" in refused.content[0].text
    assert "PRIVATE-KEY-MARKER" not in refused.content[0].text


def test_a_link_out_of_the_roots_is_left_to_the_file_tools(tmp_path: Path, workspace: Path) -> None:
    """A path leading out of the roots is not decided again (the file tools refuse it without naming the
    target); one leading elsewhere in the roots is."""
    from mcp_server.approval.links import resolved_path_args

    (workspace / "out").symlink_to(tmp_path)
    (workspace / "in").symlink_to(workspace / "docs", target_is_directory=True)
    roots = (Path(os.path.realpath(workspace)),)
    assert resolved_path_args({"path": "out/x"}, ("path",), roots) is None
    assert resolved_path_args({"path": "in/a.md", "n": 3}, ("path",), roots) == {"path": str(roots[0] / "docs/a.md"),
                                                                              "n": 3}
    assert resolved_path_args({"paths": ["in/a.md", 7, "plain"]}, ("paths",), roots) == {
        "paths": [str(roots[0] / "docs/a.md"), 7, "plain"]}


def test_links_are_followed_as_the_kernel_does(make_settings: Any, workspace: Path) -> None:
    """`..` after a link leaves the link's target (not the link's folder), and a name that merely starts with
    `~` is an ordinary name (a review found both reading `.ssh/github`); a name the OS cannot take does not turn
    a deny into an ask."""
    (workspace / ".ssh" / "config.d").mkdir(parents=True)
    (workspace / ".ssh" / "github").write_text("PRIVATE")
    (workspace / "q").symlink_to(workspace / ".ssh" / "config.d")
    (workspace / "~d").symlink_to(workspace / ".ssh")
    gate = PolicyGate(make_settings())
    for path in ("q/../github", "~d/github", "./q/../github"):
        found = gate.verdict(READ, {"path": path}, CallOrigin())
        assert (found.action, found.rule_id) == ("deny", "files.secret_denied"), path
        assert "'.ssh/github' (in the workspace)" in found.reason
    odd = gate.verdict(READ, {"path": ".ssh/id_rsa\ud800"}, CallOrigin())
    assert odd.action == "deny"
