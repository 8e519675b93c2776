"""Issue 30, the sandbox half: what a shell command can see, write and reach, through the real server (the SDK
client, the default rules, the real sandbox) where a finding was reproduced that way.

- auto-allowed commands (the shipped policy's allow-list, no person involved) run with every root read-only;
  a command a person approved runs with writable roots;
- the sandbox's view is an allow-list: system folders, the roots, a private HOME and /tmp;
- folders on the way to a guarded path (a nested repository's `.git`, the rules file) cannot be renamed;
- repository config cannot make git run programs in an auto-allowed command.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from foundation.errors import GeneralAgentError
from tests import approval_helpers as helpers
from tests.conftest import connect, require_os_sandbox, shell_runtime
from tools.bash import READ_ONLY_NOTE, run_bash_command
from tools.runtime import CallContext, Runtime

MARKER = "s3cr3t-marker-30a"
pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def need_sandbox() -> None:
    require_os_sandbox()


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside the roots and outside /tmp (the sandbox's /tmp was always its own)."""
    path = Path(tempfile.mkdtemp(prefix="ga-outside-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True)


def _repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q")
    (path / "a.txt").write_text("alpha\n")
    _git(path, "add", "a.txt")
    _git(path, "commit", "-qm", "first")
    return path


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file and folder under `root` (`.git` too) with its content: what a read-only run must not change."""
    out: dict[str, bytes | None] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(folder, name), root)] = None
        for name in files:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, root)] = Path(path).read_bytes() if not os.path.islink(path) else b"->"
    return out


def _call(consent: str) -> CallContext:
    call = CallContext(tool="run_bash_command")
    call.consent = consent  # type: ignore[assignment]  # (set as the dispatch point sets it)
    return call


def _auto(rt: Runtime, command: str) -> Any:
    return run_bash_command(command, timeout=30, rt=rt, call=_call("policy"))


# -- finding 1: an auto-allowed command writes nothing ------------------------------------------------------


async def test_finding1_tree_bundled_options_write_nothing(make_settings: Any, workspace: Path) -> None:
    """`tree -Lo 1 FILE .` (tree reads `-Lo` as -L 1 -o FILE) wrote FILE with attacker-chosen content while the
    policy allowed it: now the auto-allowed run has read-only roots, so it writes nothing, whatever the policy's
    model of tree's options says. The same command approved by a person writes (the roots are writable then)."""
    (workspace / "src").mkdir()
    (workspace / "src" / "import os; os.system('id')").write_text("")
    before = _snapshot(workspace)
    async with connect(make_settings(bash_enabled=True)) as client:
        said = await client.call_tool("run_bash_command", {"command": "tree -Lo 1 conftest.py ."})
    assert not (workspace / "conftest.py").exists(), said
    assert _snapshot(workspace) == before
    if not said.is_error:  # allowed without asking (the finding): it ran, read-only, and failed
        assert said.structured_content["exit_code"] != 0, said
    async with connect(make_settings(bash_enabled=True),
                       elicitation_callback=helpers.elicitation_answer("accept", "approve_once")) as client:
        approved = await client.call_tool("run_bash_command", {"command": "tree -L 1 -o listing.txt ."})
    assert not approved.is_error and (workspace / "listing.txt").is_file(), approved


def test_finding1_auto_clearance_cannot_write_any_root(make_settings: Any, workspace: Path, tmp_path: Path) -> None:
    """By construction: with the policy's consent no root can be changed (files, folders, renames, the `.git`)."""
    second = _repo(tmp_path / "second")
    _repo(workspace)
    rt = shell_runtime(make_settings(bash_enabled=True, roots=[workspace, second]))
    before = (_snapshot(workspace), _snapshot(second))
    result = _auto(rt, f"echo x > new.txt; echo y >> a.txt; mkdir d; mv a.txt b.txt; rm -f a.txt; touch {second}/n; "
                       f"git -C {second} commit --allow-empty -qm x; git tag t; echo done")
    assert result.stdout.strip() == "done" and "Read-only file system" in result.stderr, result
    assert (_snapshot(workspace), _snapshot(second)) == before
    assert _auto(rt, "echo scratch > /tmp/s && cat /tmp/s && echo h > ~/h && cat ~/h").stdout == "scratch\nh\n"
    refused = _auto(rt, "sort -o sorted.txt a.txt")
    assert refused.exit_code and refused.note == READ_ONLY_NOTE, refused


async def test_everyday_read_only_work_runs_unprompted(make_settings: Any, workspace: Path) -> None:
    """ls, cat, grep -rn, find, wc, head and git status/log/diff in a clean repository run without asking and
    succeed with the roots read-only (git takes no optional lock); `grep -rn` in a repository root exits 0 (the
    stand-in for a missing `.git/config.worktree` was an unreadable device: exit 2)."""
    _repo(workspace)
    (workspace / "notes.md").write_text("alpha beta\n")
    _git(workspace, "add", "notes.md")
    _git(workspace, "commit", "-qm", "notes")
    commands = ["ls -la", "cat a.txt", "grep -rn alpha .", "find . -name '*.md'", "wc -l a.txt notes.md",
                "head -n 1 notes.md", "git status", "git log --oneline", "git diff HEAD~1", "git show --stat HEAD"]
    before = _snapshot(workspace)
    async with connect(make_settings(bash_enabled=True)) as client:
        said = {c: await client.call_tool("run_bash_command", {"command": c}) for c in commands}
    for command, result in said.items():
        assert not result.is_error, (command, result.content)
        assert result.structured_content["exit_code"] == 0, (command, result.structured_content)
    assert "a.txt:1:alpha" in said["grep -rn alpha ."].structured_content["stdout"]
    assert "nothing to commit" in said["git status"].structured_content["stdout"]
    assert _snapshot(workspace) == before


# -- finding 2 / 5: the view is an allow-list ------------------------------------------------------------


async def test_finding2_a_link_out_of_the_root_leads_nowhere(make_settings: Any, workspace: Path,
                                                            outside: Path) -> None:
    """`cat link/…`, `head`, `grep -R`, `cd link && cat` read an MCP client config outside the roots through a
    symlink in the root: nothing outside the roots and the system folders is in the sandbox now. (A command
    naming the link asks: the policy judges path words through their symlinks; what reaches the link without
    naming it, a glob or a recursive walk, runs unasked and finds nothing.)"""
    (outside / "notes.txt").write_text(f'{{"env": {{"GENERALAGENT_LLM_API_KEY": "{MARKER}"}}}}\n')
    (workspace / "link").symlink_to(outside)
    (workspace / "file-link").symlink_to(outside / "notes.txt")
    named = ["cat link/notes.txt", "head file-link", "grep -R API_KEY link/", "cd link && cat notes.txt", "ls link/"]
    unnamed = ["cat */notes.txt", "head file-l*", "grep -R API_KEY .", "ls -R ."]
    async with connect(make_settings(bash_enabled=True)) as client:
        asked = [await client.call_tool("run_bash_command", {"command": c}) for c in named]
        said = [await client.call_tool("run_bash_command", {"command": c}) for c in unnamed]
    assert all(r.is_error and "Approval required" in r.content[0].text for r in asked), [r.content for r in asked]
    ran = [r.structured_content for r in said if not r.is_error]
    assert len(ran) == len(unnamed), [r.content for r in said]  # allowed without asking: they ran
    assert all(r["exit_code"] for r in ran[:2]), ran
    assert MARKER not in repr(ran)


def test_only_the_allow_listed_folders_are_visible(make_settings: Any, workspace: Path, data_dir: Path,
                                                   outside: Path) -> None:
    """The sandbox's / holds the system folders, /dev, /proc, /tmp, /run and the path to the roots; not the
    server's data folder, other disks or the home; /etc's credential files are covered."""
    (data_dir / "approvals.txt").write_text(MARKER)
    (outside / "x").write_text(MARKER)
    rt = shell_runtime(make_settings(bash_enabled=True))
    top = _auto(rt, "ls -A /").stdout.split()
    allowed = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt", "dev", "proc", "tmp", "run",
               workspace.parts[1]}
    assert set(top) <= allowed and {"usr", "etc", "proc", "dev", "tmp"} <= set(top), top
    probe = _auto(rt, f"cat {data_dir}/approvals.txt {outside}/x /etc/shadow /etc/gshadow; ls /root /home /var; "
                      "cat /etc/passwd | head -1")
    assert MARKER not in probe.stdout and "root:" in probe.stdout and "$" not in probe.stdout, probe
    assert not os.path.exists("/etc/shadow") or "root:" not in probe.stdout.split("\n", 1)[1:]


# -- finding 3: guarded paths cannot be replaced by renaming a parent ---------------------------------------


async def test_finding3_renaming_a_parent_of_a_guarded_folder_fails(make_settings: Any, workspace: Path) -> None:
    """An approved command renamed the folder above a nested repository's `.git` (and the rules file's folder,
    husky's folder, a skills folder's parent) and planted new ones; the host's next git run ran the planted fsmonitor. Every folder on the
    way from a root to a guarded path is pinned now: the renames fail and nothing is planted."""
    repo = _repo(workspace / "lib" / "proj")
    (workspace / "conf").mkdir()
    rules = workspace / "conf" / "policy.toml"
    rules.write_text("# rules\n")
    (workspace / ".husky" / "_").mkdir(parents=True)
    (workspace / "ext" / "skills" / "s").mkdir(parents=True)
    (workspace / "ext" / "skills" / "s" / "SKILL.md").write_text("# skill\n")
    _repo(workspace)
    _git(workspace, "config", "core.hooksPath", ".husky/_")
    pwned = workspace.parent / "pwned"
    plant = (f"mv lib lib2; mv lib/proj lib/proj2; mkdir -p lib/proj/.git; cp -r lib2/proj/.git lib/proj/ ; "
             f"cp -r lib/proj2/.git lib/proj/; printf '[core]\\n\\tfsmonitor = \"touch {pwned}; false\"\\n' "
             f">> lib/proj/.git/config; mv conf conf2; mkdir -p conf; n=policy; echo 'allow = [\"*\"]' > conf/$n.toml; "
             f"mv .husky .husky2; mkdir -p .husky/_; printf '#!/bin/sh\\ntouch {pwned}\\n' > .husky/_/pre-commit; "
             f"mv ext ext2; mkdir -p ext/skills/evil; echo planted > ext/skills/evil/SKILL.md; echo end")
    settings = make_settings(bash_enabled=True, policy_file=rules, skills_dirs=[workspace / "ext" / "skills"])
    async with connect(settings, elicitation_callback=helpers.elicitation_answer("accept", "approve_once")) as c:
        said = await c.call_tool("run_bash_command", {"command": plant})
    assert not said.is_error and said.structured_content["stdout"].strip() == "end", said
    assert "Device or resource busy" in said.structured_content["stderr"], said
    assert rules.read_text() == "# rules\n" and not (workspace / "conf2").exists()
    assert not (workspace / "lib2").exists() and not (workspace / "lib" / "proj2").exists()
    assert not (workspace / ".husky2").exists() and not (workspace / ".husky" / "_" / "pre-commit").exists()
    assert not (workspace / "ext2").exists() and not (workspace / "ext" / "skills" / "evil").exists()
    (repo / "a.txt").write_text("changed\n")
    _git(repo, "status")  # the host's git, outside any sandbox
    subprocess.run(["git", "commit", "-qam", "x"], cwd=workspace, capture_output=True, check=False)
    assert not pwned.exists()


# -- finding 6: repository config cannot make allow-listed git run programs ---------------------------------


async def test_finding6_repository_config_runs_no_program_under_allow_listed_git(make_settings: Any,
                                                                                workspace: Path) -> None:
    """A repository whose config sets core.fsmonitor, diff.external and a textconv driver (picked by
    `.gitattributes`), and a clean filter: `git status`, `git diff`, `git log -p`, `git show` allowed without
    asking run none of them, and still show the changes; nor when the command drops the environment's overrides
    (the run sees a copy of the config without those keys)."""
    _repo(workspace)
    (workspace / ".gitattributes").write_text("*.txt diff=evil\n*.bin filter=ev\n")
    (workspace / "b.bin").write_text("bin\n")
    _git(workspace, "add", ".gitattributes", "b.bin")
    _git(workspace, "commit", "-qm", "attrs")
    for key, value in (("core.fsmonitor", "echo PROGRAM-RAN fsmonitor >&2; false"),
                       ("diff.external", "sh -c 'echo PROGRAM-RAN external >&2'"),
                       ("diff.evil.textconv", "sh -c 'echo PROGRAM-RAN textconv >&2; cat \"$0\"'"),
                       ("filter.ev.clean", "sh -c 'echo PROGRAM-RAN clean >&2; cat'")):
        _git(workspace, "config", key, value)
    (workspace / "a.txt").write_text("alpha\nbeta\n")
    os.utime(workspace / "b.bin", (1, 1))
    commands = ["git status", "git diff", "git log -p -3", "git show HEAD~1", "git diff --stat",
                "env -u GIT_CONFIG_COUNT git diff", "env -u GIT_CONFIG_COUNT git status"]  # (env allowed: no undo)
    async with connect(make_settings(bash_enabled=True)) as client:  # the policy asks: the config names programs
        asked = {c: await client.call_tool("run_bash_command", {"command": c}) for c in commands}
    assert all(r.is_error and "bash.git_config_program" in r.content[0].text for r in asked.values()), asked
    rt = shell_runtime(make_settings(bash_enabled=True))  # run as if allowed (the config changed after the check)
    said = {c: _Ran(_auto(rt, c)) for c in commands}
    assert "PROGRAM-RAN" not in repr([r.structured_content for r in said.values()]), said
    assert "+beta" in said["git diff"].structured_content["stdout"], said["git diff"].structured_content
    assert "+alpha" in said["git show HEAD~1"].structured_content["stdout"]
    assert "modified:   a.txt" in said["git status"].structured_content["stdout"]


class _Ran:
    """A tool result shaped like the client's (`is_error`, `structured_content`) for a direct run."""

    def __init__(self, result: Any) -> None:
        self.is_error = False
        self.structured_content = result.model_dump()


# -- also noticed: no folder left in the temp dir ----------------------------------------------------------


def test_a_server_process_leaves_nothing_in_the_temp_folder(tmp_path: Path, workspace: Path) -> None:
    """Every server process left a `generalagent-git-*` folder (the `commondir` stand-in) in the temp dir: a
    process that runs commands needing every kind of stand-in leaves its temp folder as it found it."""
    _repo(workspace / "proj")
    temp = tmp_path / "temp"
    temp.mkdir()
    script = f"""
from pathlib import Path
from foundation.settings import load_settings
from mcp_server.secret_paths import loaded_on_first_use
from tools.bash import READ_ONLY_NOTE, run_bash_command
from tools.runtime import CallContext, Runtime
settings = load_settings({{"data_dir": {str(tmp_path / "data")!r}, "roots": [{str(workspace)!r}],
                           "bash_enabled": True}}, environ={{}})
rt = Runtime(settings)
rt.secret_paths = loaded_on_first_use(settings)
for consent in ("person", "policy"):
    call = CallContext(tool="run_bash_command")
    call.consent = consent
    done = run_bash_command("git -C proj status --short; grep -rn alpha proj; echo ok", rt=rt, call=call)
    assert done.exit_code == 0 and done.stdout.endswith("ok\\n"), done
"""
    env = {**os.environ, "TMPDIR": str(temp)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parent.parent, check=False)
    assert done.returncode == 0, done.stderr
    assert list(temp.iterdir()) == []


# -- the property: an allowed command changes no file ---------------------------------------------------------

WORDS = ("a.txt", "sub", ".", "sub/b.md", "new.txt", "conftest.py", "Makefile", "1", "3", "x", "-", "HEAD", "%s")


@st.composite
def allow_listed_command(draw: Any, commands: Any) -> str:
    """A command line from the policy's allow-list: a listed command, some of its options (listed, risky, short
    ones bundled like `-Lo`, values attached or apart, `--opt=value`) and operands from the scratch root."""
    name = draw(st.sampled_from(sorted(commands)))
    spec = commands[name]
    options = sorted(spec.flags | spec.values | spec.paths | spec.optional | frozenset(spec.risky))
    words = name.split()
    for _ in range(draw(st.integers(0, 3))):
        if not options:
            break
        option = draw(st.sampled_from(options))
        takes = option in spec.values or option in spec.paths
        short = [o for o in options if len(o) == 2 and o[0] == "-" and o[1] != "-"]
        if len(option) == 2 and short and draw(st.booleans()):  # a bundle: `-Lo 1 FILE`
            other = draw(st.sampled_from(short))
            words.append(option + other[1])
            words += [draw(st.sampled_from(WORDS)) for _ in range(2)]
        elif takes and option.startswith("--") and draw(st.booleans()):
            words.append(f"{option}={draw(st.sampled_from(WORDS))}")
        else:
            words += [option, *([draw(st.sampled_from(WORDS))] if takes else [])]
    words += draw(st.lists(st.sampled_from(WORDS), max_size=2))
    return shlex.join(words)


def test_property_an_allowed_command_changes_no_file(make_settings: Any, workspace: Path) -> None:
    """Random command lines built from the policy's allow-list, run through the real dispatch point (the gate
    decides; what it allows without a person runs) in the real sandbox on a scratch root: whenever the verdict
    was "allow", no file or folder of the root changed (the roots are read-only then: by construction)."""
    import anyio

    import policy
    from foundation.calls import CallOrigin
    from mcp_server.server import build_server

    _repo(workspace)
    (workspace / "sub").mkdir()
    (workspace / "sub" / "b.md").write_text("# b\nbeta\n")
    commands = policy.load_rules(None).shell.commands
    _, dispatcher = build_server(make_settings(bash_enabled=True))
    before = _snapshot(workspace)
    allowed: list[str] = []

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(allow_listed_command(commands))
    @example("tree -Lo 1 conftest.py .")  # finding 1: tree reads a bundle as "each takes the next word"
    def check(command: str) -> None:
        try:
            anyio.run(dispatcher.run, "run_bash_command", {"command": command, "timeout": 10}, CallOrigin())
        except GeneralAgentError:  # asked or refused: not run
            return
        allowed.append(command)
        assert _snapshot(workspace) == before, command

    check()
    assert len(allowed) >= 10, allowed  # the property was really exercised


async def test_finding1_from_a_sub_agent_and_an_out_of_band_approval(make_settings: Any, workspace: Path) -> None:
    """A sub-agent's shell call passes the same dispatch point: allowed on its own, it runs read-only (tree's
    bundle writes nothing); approved by the human out of band (the approve command), it may write."""
    from foundation.calls import CallOrigin
    from foundation.errors import ApprovalRequired
    from mcp_server.server import build_server

    _, dispatcher = build_server(make_settings(bash_enabled=True))
    origin = CallOrigin(kind="subagent", client_id="c", subagent_id="t1", agent_stack=("root",))
    before = _snapshot(workspace)
    with contextlib.suppress(GeneralAgentError):
        await dispatcher.run("run_bash_command", {"command": "tree -Lo 1 conftest.py ."}, origin)
    assert _snapshot(workspace) == before
    write = {"command": "echo made > made.txt"}
    with pytest.raises(ApprovalRequired, match=r"Approval id: ap-") as info:
        await dispatcher.run("run_bash_command", write, origin)
    approval_id = str(info.value).split("Approval id: ")[1].split()[0]
    dispatcher.gate.store.decide(approval_id, True, by="cli")  # type: ignore[attr-defined]  # the human
    done = await dispatcher.run("run_bash_command", write, origin)
    assert done.exit_code == 0 and (workspace / "made.txt").read_text() == "made\n", done  # type: ignore[attr-defined]


# -- the sanitised config, checked against git itself ---------------------------------------------------------

SECTION_KEYS = st.sampled_from([("core", None, "fsmonitor"), ("diff", None, "external"), ("core", None, "bare"),
                                ("diff", "D", "textconv"), ("diff", "D", "command"), ("filter", "D", "clean"),
                                ("filter", "D", "smudge"), ("filter", "D", "process"), ("merge", "D", "driver"),
                                ("gpg", None, "program"), ("gpg", "ssh", "program"), ("user", None, "name"),
                                ("remote", "D", "url"), ("branch", "D", "merge"), ("diff", "D", "binary")])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(SECTION_KEYS, st.sampled_from(["Evil", "a.b", "x y", "lfs"]),
                          st.sampled_from(["v", "sh -c 'x'", "a b", "true"])), min_size=1, max_size=6))
def test_property_the_sanitised_config_names_no_program(entries: list[Any]) -> None:
    """Config files with random program and data keys (odd driver names too), written and read by git: the copy
    a read-only run sees sets none of the keys git would run (as git lists them), and keeps every other key."""
    from tools.sandbox_git import PROGRAM_KEY, program_keys, sanitized_configs

    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config"
        config.write_text("")
        for (section, sub, name), driver, value in entries:
            key = f"{section}.{driver if sub == 'D' else sub}.{name}" if sub else f"{section}.{name}"
            subprocess.run(["git", "config", "--file", str(config), "--add", key, value], check=True)
        listing = subprocess.run(["git", "config", "--file", str(config), "--list", "--show-origin", "-z"],
                                 capture_output=True, text=True, check=True).stdout
        programs = program_keys(listing, Path(tmp))
        [(copy, original)] = sanitized_configs(programs, Path(tmp) / "copies") or [(config, config)]
        assert original == config
        kept = subprocess.run(["git", "config", "--file", str(copy), "--list", "-z"], capture_output=True,
                              text=True, check=True).stdout.split("\0")
        keys = [entry.partition("\n")[0] for entry in kept if entry]
        before = [entry.partition("\n")[0] for entry in listing.split("\0")[1::2]]
        assert not any(PROGRAM_KEY.fullmatch(key) for key in keys), keys
        assert keys == [key for key in before if not PROGRAM_KEY.fullmatch(key)]


async def test_a_link_to_the_root_folder_does_not_stop_every_command(make_settings: Any, workspace: Path) -> None:
    """Finding 7: one link to `/` inside a root made every shell command refuse (the secret-store walk followed
    it past its entry limit). Links out of the roots are not walked now: the sandbox shows nothing of the user's
    there, and a command naming the link is judged through it (outside the roots: it asks)."""
    (workspace / "notes.txt").write_text("hello\n")
    (workspace / "everything").symlink_to("/")
    async with connect(make_settings(bash_enabled=True)) as client:
        plain = await client.call_tool("run_bash_command", {"command": "cat notes.txt"})
        named = await client.call_tool("run_bash_command", {"command": "ls everything/etc"})
    assert not plain.is_error and plain.structured_content["stdout"] == "hello\n", plain.content
    assert named.is_error and "Approval required" in named.content[0].text, named.content
