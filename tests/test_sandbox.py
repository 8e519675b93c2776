"""The OS sandbox under run_bash_command (issue 14): each escape the red team found fails inside
the sandbox even when the policy lets the command through. The runner is called directly
(bypassing the policy), except for the git reproducer, which goes through the real MCP client.

Needs bubblewrap: without it these tests skip with the install command, except under CI=true,
where a missing install step (scripts/sandbox.sh) must fail the run.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import connect, require_os_sandbox, shell_runtime
from tools import sandbox_net
from tools.bash import GIT_GUARD_NOTE, run_bash_command
from tools.runtime import CallContext, Runtime
from tools.sandbox import SandboxSpec, bwrap_argv, seatbelt_profile

MARKER = "s3cr3t-marker-7f1d"


@pytest.fixture
def need_sandbox() -> None:
    require_os_sandbox()


@pytest.fixture
def rt(make_settings: Any) -> Runtime:
    return shell_runtime(make_settings(bash_enabled=True))


def run(rt: Runtime, command: str) -> Any:
    return run_bash_command(command, timeout=30, rt=rt, call=CallContext(tool="run_bash_command", consent="person"))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the workspace roots that the server itself may write."""
    path = tmp_path / "outside"
    path.mkdir()
    return path


@pytest.mark.usefixtures("need_sandbox")
def test_sort_compress_program_runs_but_cannot_write_outside(rt: Runtime, workspace: Path, outside: Path) -> None:
    """Reproducer 1: `sort --compr=sh` executes lines of a workspace file; inside the sandbox the
    code runs (it may write in the root) but cannot change anything outside it."""
    payload = f"echo ran >> {workspace}/ran.txt; echo pwned > {outside}/pwned.txt; echo pwned > /etc/pwned.txt\n"
    (workspace / "f").write_text(payload * 50)
    result = run(rt, "sort --compr=sh -S 1 " + " f" * 40 + " > /dev/null; echo done")
    assert result.stdout.strip().endswith("done"), result
    assert (workspace / "ran.txt").is_file(), "sort did not execute the payload: the test proves nothing"
    assert not (outside / "pwned.txt").exists() and not Path("/etc/pwned.txt").exists()


@pytest.mark.usefixtures("need_sandbox")
def test_writes_outside_the_roots_fail(rt: Runtime, workspace: Path, outside: Path, data_dir: Path) -> None:
    """Reproducer 2's class: whatever spelling slips past the parser, writes land in the roots or nowhere."""
    targets = [outside / "a.txt", data_dir / "b.txt", Path.home() / f".bashrc-{MARKER}", Path("/usr/local") / MARKER]
    command = "; ".join(f"sort --outp={t} f 2>/dev/null; echo x > {t}" for t in targets) + "; echo ok > inside.txt"
    (workspace / "f").write_text("payload\n")
    result = run(rt, command)
    assert (workspace / "inside.txt").read_text() == "ok\n", result
    for target in targets:
        assert not target.exists(), f"{target} was written from the sandbox"
    assert "Read-only file system" in result.stderr


@pytest.mark.usefixtures("need_sandbox")
def test_secret_stores_data_dir_and_other_environs_are_invisible(
    rt: Runtime, tmp_path: Path, data_dir: Path, monkeypatch: Any
) -> None:
    """Reproducer 4's targets: ~/.ssh, ~/.aws, the data dir and /proc/<pid>/environ of others."""
    home = tmp_path / "home"
    (tmp_path / "gnupg-real").mkdir()
    home.mkdir()
    (home / ".gnupg").symlink_to(tmp_path / "gnupg-real")  # a linked secret store: its target is hidden
    for name in (".ssh/id_rsa", ".aws/credentials", ".gnupg/key", ".config/gcloud/token", ".netrc"):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(MARKER)
    (data_dir / "approvals.txt").write_text(MARKER)
    monkeypatch.setenv("HOME", str(home))  # the server user's home, as the sandbox sees it
    monkeypatch.setenv("FAKE_API_KEY", MARKER)  # in the server's environ, scrubbed from the command's
    reads = [home / ".ssh/id_rsa", home / ".aws/credentials", home / ".gnupg/key", home / ".config/gcloud/token",
             home / ".netrc", data_dir / "approvals.txt", f"/proc/{os.getpid()}/environ"]
    command = "; ".join(f"cat {p}" for p in reads) + "; cat /proc/*/environ; file -f /proc/1/environ; echo end"
    result = run(rt, command)
    assert result.stdout.rstrip().endswith("end"), result
    assert MARKER not in result.stdout + result.stderr


@pytest.mark.usefixtures("need_sandbox")
def test_processes_of_the_host_are_not_visible(rt: Runtime) -> None:
    result = run(rt, "ls /proc | grep -c '^[0-9]'")
    assert int(result.stdout.strip()) < 10, result  # only the sandbox's own few processes


@pytest.mark.usefixtures("need_sandbox")
def test_network_is_off_unless_enabled_and_never_reaches_the_host(make_settings: Any) -> None:
    """Finding 4's class: the command has its own network namespace, network on or off; with `bash_network` it
    is connected outbound-only (slirp4netns), and neither the host's loopback nor its own addresses (a service
    bound to all of them) can be reached: no relay to the approval page or the database. With the network off
    netlink and vsock sockets cannot be made either."""
    from tools.sandbox_net import host_addresses

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    accepted: list[Any] = []

    def serve() -> None:
        try:
            while True:
                accepted.append(listener.accept()[0])
        except OSError:
            return

    threading.Thread(target=serve, daemon=True).start()
    hosts = ["127.0.0.1", "10.0.2.2", *host_addresses()]
    probe = ("python3 -c 'import socket\nfor h in " + repr(hosts).replace("'", '"') + ":\n try:\n"
             f"  socket.create_connection((h, {port}), 3); print(\"connected\", h)\n except OSError as e: print(h, e)'"
             "; python3 -c 'import socket\nfor f in (16, 40):\n try: socket.socket(f, socket.SOCK_DGRAM); print(\"made\", f)\n"
             " except OSError as e: print(f, e)'; ip route; cat /etc/resolv.conf")
    try:
        off = run(shell_runtime(make_settings(bash_enabled=True)), probe)
        assert "connected" not in off.stdout and not accepted, off
        assert "made" not in off.stdout and "16 [Errno 1]" in off.stdout and "40 [Errno 1]" in off.stdout, off
        if sandbox_net.available() is not None:
            pytest.skip(f"bash_network needs {sandbox_net.available()}")
        on = run(shell_runtime(make_settings(bash_enabled=True, bash_network=True)), probe)
        assert "connected" not in on.stdout and not accepted, on
        assert "default via 10.0.2.2" in on.stdout and "nameserver 10.0.2.3" in on.stdout, on
        assert "made 16" in on.stdout and "made 40" not in on.stdout, on  # netlink in its own namespace only
    finally:
        listener.close()


@pytest.mark.usefixtures("need_sandbox")
def test_cannot_regain_privileges_or_remount(rt: Runtime) -> None:
    result = run(rt, "grep CapEff /proc/self/status; mount -o remount,rw / 2>&1; echo x > /probe 2>&1; echo end")
    assert "CapEff:\t0000000000000000" in result.stdout, result
    assert not Path("/probe").exists()


@pytest.mark.usefixtures("need_sandbox")
def test_rules_file_inside_a_root_stays_read_only(make_settings: Any, workspace: Path) -> None:
    rules = workspace / "policy.toml"
    rules.write_text("# rules\n")
    rt = shell_runtime(make_settings(bash_enabled=True, policy_file=rules))
    result = run(rt, "echo 'allow = [\"*\"]' >> policy.toml; echo ok > other.txt")
    assert rules.read_text() == "# rules\n" and (workspace / "other.txt").is_file(), result


def _git(workspace: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(workspace)}
    subprocess.run(["git", *args], cwd=workspace, env=env, check=True, capture_output=True)


@pytest.mark.anyio
@pytest.mark.usefixtures("need_sandbox")
async def test_workspace_gitconfig_fsmonitor_does_not_run(make_settings: Any, workspace: Path) -> None:
    """Reproducer 3, through the MCP client with bash enabled and the default rules: a tracked
    `.gitconfig` with core.fsmonitor must not run on `git status`."""
    _git(workspace, "init", "-q")
    ran = workspace / "fsmonitor-ran"
    (workspace / ".gitconfig").write_text(f'[core]\n\tfsmonitor = "echo pwned > {ran}; false"\n')
    (workspace / "a.txt").write_text("a\n")
    _git(workspace, "add", ".gitconfig", "a.txt")
    async with connect(make_settings(bash_enabled=True)) as client:
        result = await client.call_tool("run_bash_command", {"command": "git status"})
    assert not result.is_error, result
    assert "a.txt" in result.structured_content["stdout"]
    assert not ran.exists(), "the workspace .gitconfig was used as git's global config"


def test_bwrap_argv_shape(tmp_path: Path) -> None:
    """Later mounts cover earlier ones: hidden folders after the roots, a root inside a hidden folder
    (the default workspace in a data dir that lies in another root) bound again after it, the rules
    file read-only last; no network flag by default."""
    data = tmp_path / "data"
    root = data / "workspaces" / "s1"
    root.mkdir(parents=True)
    rules = root / "policy.toml"
    rules.write_text("")
    (root / ".env").write_text("")
    spec = SandboxSpec(roots=(tmp_path, root), cwd=root, home=tmp_path, hidden=(data,), read_only=(rules,),
                       covered=(root / ".env",), roots_writable=True)
    argv = bwrap_argv(["true"], spec, "bwrap")
    joined = " ".join(argv)
    assert "--ro-bind / /" not in joined and "--ro-bind /usr /usr" in joined and "/etc/shadow" in joined
    assert "--share-net" not in argv and "--die-with-parent" in argv and "--new-session" in argv
    assert joined.index(f"--tmpfs {data}") < joined.rindex(f"--bind {root} {root}") < joined.index(f"--ro-bind {rules}")
    assert joined.rindex(f"--bind {tmp_path} {tmp_path}") < joined.index(f"--ro-bind /dev/null {root / '.env'}")
    assert argv[-2:] == ["--", "true"]
    assert "--share-net" not in bwrap_argv(["true"], SandboxSpec(roots=(root,), cwd=root, home=tmp_path, network=True))
    read_only = " ".join(bwrap_argv(["true"], SandboxSpec(roots=(tmp_path, root), cwd=root, home=Path("/tmp/h"))))
    assert f"--ro-bind {tmp_path} {tmp_path}" in read_only and f"--bind {tmp_path} " not in read_only


def test_seatbelt_profile_shape(tmp_path: Path) -> None:
    """macOS cannot be tested here; the profile at least denies writes, hidden reads and network."""
    spec = SandboxSpec(roots=(tmp_path,), cwd=tmp_path, home=tmp_path, hidden=(tmp_path / "x",))
    (tmp_path / "x").mkdir()
    profile = seatbelt_profile(spec)
    assert "(deny file-write*)" in profile and "(deny network*)" in profile and "(deny file-read* file-write*" in profile
    networked = seatbelt_profile(SandboxSpec(roots=(tmp_path,), cwd=tmp_path, home=tmp_path, network=True))
    assert "(deny network*)" not in networked  # network on: still not localhost (the approval page)
    assert networked.splitlines()[-1] == '(deny network-outbound (remote ip "localhost:*"))'
    data = tmp_path / "data"  # the default workspace in the hidden data folder, with a secret store in it
    (data / "ws").mkdir(parents=True)
    (data / "ws" / ".env").write_text("")
    spec = SandboxSpec(roots=(data / "ws",), cwd=data / "ws", home=tmp_path, hidden=(data,), covered=(data / "ws/.env",))
    lines = seatbelt_profile(spec).splitlines()
    allow_root = next(i for i, line in enumerate(lines) if line.startswith("(allow file-read*"))
    assert any(".env" in line and line.startswith("(deny file-read*") for line in lines[allow_root:])


def _git_out(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@pytest.mark.usefixtures("need_sandbox")
def test_git_config_and_hooks_cannot_be_planted_but_git_works(rt: Runtime, workspace: Path) -> None:
    """Defence in depth: even a command the policy wrongly let through cannot change a root's git config or
    hooks (which a later git run outside the sandbox would execute), nor swap the whole .git folder; git
    status/diff/add/commit/log work as before."""
    _git(workspace, "init", "-q")
    config = (workspace / ".git" / "config").read_text()
    hooks = sorted(p.name for p in (workspace / ".git" / "hooks").iterdir())
    (workspace / "a.txt").write_text("a\n")
    plant = run(rt, "echo '[core]' >> .git/config; echo '\tfsmonitor = touch pwned' >> .git/config; "
                    "echo 'touch pwned' > .git/hooks/pre-commit; rm -rf .git/hooks; mv .git/config .git/c; "
                    "mv .git .git-old; mkdir -p evil/.git; echo ok > plain.txt")
    assert (workspace / ".git" / "config").read_text() == config, plant
    assert sorted(p.name for p in (workspace / ".git" / "hooks").iterdir()) == hooks
    assert not (workspace / ".git-old").exists() and (workspace / "plain.txt").is_file()
    used = run(rt, "git status --short && git add a.txt && git -c user.name=t -c user.email=t@example.com "
                   "commit -qm first && echo b >> a.txt && git diff --stat && git log --oneline && git status --short")
    assert used.exit_code == 0, used
    assert "first" in used.stdout and "a.txt" in used.stdout
    assert "first" in _git_out(workspace, "log", "--oneline")


@pytest.mark.usefixtures("need_sandbox")
def test_a_git_config_write_that_fails_says_why_and_what_to_do(rt: Runtime, workspace: Path) -> None:
    """`git config`, `git remote add`, `git branch -m` and a hook write fail in the sandbox; the result says that
    the sandbox keeps git config and hooks read-only and what to do instead (edit_file, or the user runs it)."""
    from tools.bash import GIT_GUARD_NOTE

    _git(workspace, "init", "-q")
    for command in ["git config user.email t@example.com", "git remote add origin https://example.com/r.git",
                    "git checkout -q -b a && git branch -m a b", "echo 'touch pwned' > .git/hooks/pre-commit"]:
        result = run(rt, command)
        assert result.exit_code and result.note == GIT_GUARD_NOTE, (command, result)
    for command in ["git status --short", "touch /usr/pwned", "echo x > .git/../missing/x"]:  # not a guarded path
        result = run(rt, command)
        assert result.note is None, (command, result)
    store = workspace / "store"  # a git folder not called .git, named by the root's .git file: matched by its path
    subprocess.run(["rm", "-rf", str(workspace / ".git")], check=True)
    _git(workspace, "init", "-q", f"--separate-git-dir={store}")
    result = run(rt, "git config user.name t")
    assert str(store / "config") in result.stderr and result.note == GIT_GUARD_NOTE, result


@pytest.mark.usefixtures("need_sandbox")
def test_a_worktrees_git_file_and_its_git_folders_stay_put(make_settings: Any, workspace: Path,
                                                            tmp_path: Path) -> None:
    """A root that is a git worktree: its `.git` file (naming the git folder) is read-only, and so are
    the config and hooks of the repository it leads to."""
    _git(workspace, "init", "-q")
    (workspace / "a.txt").write_text("a\n")
    _git(workspace, "add", "a.txt")
    _git(workspace, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first")
    tree = tmp_path / "tree"
    _git(workspace, "worktree", "add", "-q", str(tree))
    rt = shell_runtime(make_settings(bash_enabled=True, roots=[tree, workspace]))
    gitfile = (tree / ".git").read_text()
    result = run(rt, f"echo 'gitdir: {tree}/evil' > .git; echo '[core]' >> {workspace}/.git/config; "
                     f"touch {workspace}/.git/hooks/post-checkout; git status --short; echo ok > b.txt")
    assert (tree / ".git").read_text() == gitfile and "[core]\n[core]" not in (workspace / ".git/config").read_text()
    assert not (workspace / ".git" / "hooks" / "post-checkout").exists() and (tree / "b.txt").is_file(), result


@pytest.mark.anyio
@pytest.mark.usefixtures("need_sandbox")
async def test_secret_stores_stay_covered_in_the_default_workspace_and_planted_git_folders(
        make_settings: Any) -> None:
    """The default workspace lies in the data folder, which the sandbox hides and then binds the workspace back:
    the covers of its secret stores come after that bind (the data folder outside /tmp, as on a real machine;
    under /tmp the hiding is skipped). A `.git` file naming a folder that is not a git folder pins nothing; a
    linked folder leading out of the workspace is checked too."""
    data = Path(tempfile.mkdtemp(prefix="ga-sandbox-", dir="/var/tmp"))
    outside = Path(tempfile.mkdtemp(prefix="ga-outside-", dir="/var/tmp"))
    (outside / "deeper").mkdir()
    (outside / "deeper" / ".env").write_text(f"API_KEY={MARKER}\n")
    try:
        settings = make_settings(bash_enabled=True, data_dir=data, roots=[])
        async with connect(settings) as client:
            first = await client.call_tool("run_bash_command", {"command": "pwd"})
            root = Path(first.structured_content["cwd"])
            assert root.is_relative_to(data), first
            for name in (".env", "sub/.ssh/config", "deep/.netrc"):
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_text(f"API_KEY={MARKER}\n")
            (root / "sub" / ".git").write_text("gitdir: .ssh\n")
            (root / "deep" / ".git").write_text("gitdir: .\n")
            (root / "ext").symlink_to(outside)
            said = await client.call_tool("run_bash_command",
                                          {"command": "grep -r API_KEY .; grep -R API_KEY .; cat *; echo end"})
            # (`grep -R` follows the link `ext` out of the workspace; naming `ext` itself asks: the policy
            # judges a path word through its symlinks, issue 30 finding 2)
        out = said.structured_content["stdout"] + said.structured_content["stderr"]
        assert said.structured_content["stdout"].rstrip().endswith("end") and MARKER not in out, out
    finally:
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(outside, ignore_errors=True)


@pytest.mark.usefixtures("need_sandbox")
def test_repositories_nested_in_a_root_and_submodules_are_guarded_too(rt: Runtime, workspace: Path) -> None:
    """A repository deeper in a root (`proj/.git`) and a submodule (a `.git` file naming a folder under the
    parent's `.git/modules`): their config, hooks and `.git` stay put, and git works in them."""
    proj, sub = workspace / "vendor" / "proj", workspace / "lib"
    proj.mkdir(parents=True)
    _git(proj, "init", "-q")
    (proj / "a.txt").write_text("a\n")
    _git(workspace, "init", "-q")
    modules = workspace / ".git" / "modules" / "lib"
    modules.parent.mkdir(parents=True)
    _git(workspace, "init", "-q", f"--separate-git-dir={modules}", str(sub))
    before = {p: p.read_text() for p in (proj / ".git/config", modules / "config", sub / ".git")}
    plant = run(rt, "echo '[core]' >> vendor/proj/.git/config; git -C vendor/proj config core.fsmonitor 'touch x'; "
                    "touch vendor/proj/.git/hooks/pre-commit; mv vendor/proj/.git vendor/proj/.gitx; "
                    "git -C lib config core.hooksPath /tmp; echo 'gitdir: /tmp/evil' > lib/.git; echo ok > b.txt")
    assert {p: p.read_text() for p in before} == before, plant
    assert not (proj / ".git/hooks/pre-commit").exists() and (proj / ".git").is_dir()
    assert (workspace / "b.txt").is_file() and "vendor/proj/.git/config: Read-only" in plant.stderr
    used = run(rt, "cd vendor/proj && git add a.txt && git -c user.name=t -c user.email=t@example.com commit -qm one "
                   "&& git log --oneline && cd ../../lib && git status --short")
    assert used.exit_code == 0 and "one" in used.stdout, used


@pytest.mark.usefixtures("need_sandbox")
def test_missing_rules_agents_and_skills_paths_cannot_be_made(make_settings: Any, workspace: Path) -> None:
    """What the file tools refuse to write stays unwritable from the sandbox even before it exists (an
    empty read-only placeholder holds its place while the command runs, and is gone afterwards)."""
    (workspace / "skills2" / "s").mkdir(parents=True)
    (workspace / "skills2" / "s" / "SKILL.md").write_text("# skill\n")
    missing = [workspace / "policy.toml", workspace / "agents.toml", workspace / "cfg" / "skills.toml",
               workspace / "skills"]
    settings = make_settings(bash_enabled=True, policy_file=missing[0], agents_file=missing[1],
                             skills_file=missing[2], skills_dirs=[missing[3], workspace / "skills2"])
    rt = Runtime(settings)  # no policy (its file is missing): the home is hidden as a whole
    result = run(rt, "echo 'allow = [\"*\"]' > policy.toml; echo x > agents.toml; mkdir -p cfg; "
                     "echo x > cfg/skills.toml; mkdir -p skills/evil; echo x > skills2/s/SKILL.md; "
                     "mkdir skills2/evil; echo ok > other.txt")
    assert not any(os.path.lexists(p) for p in missing), result
    assert (workspace / "skills2" / "s" / "SKILL.md").read_text() == "# skill\n"
    assert not (workspace / "skills2" / "evil").exists() and (workspace / "other.txt").is_file()


@pytest.mark.anyio
@pytest.mark.usefixtures("need_sandbox")
async def test_secret_stores_in_the_workspace_cannot_be_read(make_settings: Any, workspace: Path) -> None:
    """Commands the policy allows without asking read what nobody named (`grep -r`, `cat *`): the secret
    stores inside the workspace (the policy's deny patterns) cannot be read, found anew as they appear;
    other files, and those the policy only asks for, stay readable."""
    for name in (".env", "id_rsa", "app/.env.production", "app/.ssh/config", "deep/a/b/.netrc"):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(f"API_KEY={MARKER}\n")
    (workspace / "notes.txt").write_text("API_KEY is read from .env\n")
    (workspace / "app" / "credentials.json").write_text('{"API_KEY": "asked-for"}\n')
    (workspace / "app" / "link.txt").symlink_to(workspace / "id_rsa")
    commands = ["grep -r API_KEY .", "cat *", "cat app/*", "grep -R API_KEY app", "ls -aR app"]
    async with connect(make_settings(bash_enabled=True)) as client:
        said = [await client.call_tool("run_bash_command", {"command": c}) for c in commands]
        (workspace / "late").mkdir()
        (workspace / "late" / ".env.local").write_text(f"API_KEY={MARKER}\n")
        said.append(await client.call_tool("run_bash_command", {"command": "grep -r API_KEY late"}))
        unrelated = await client.call_tool("run_bash_command", {"command": "ls nosuchfile"})
    out = "\n".join(r.structured_content["stdout"] + r.structured_content["stderr"] for r in said if not r.is_error)
    assert len([r for r in said if not r.is_error]) == len(commands) + 1, [r.content for r in said]
    assert MARKER not in out
    assert "notes.txt:API_KEY is read from .env" in out and "asked-for" in out
    assert (workspace / ".env").read_text() == f"API_KEY={MARKER}\n"  # hidden, not changed
    last = said[-1].structured_content
    assert last["exit_code"] == 2 and "late/.env.local: Permission denied" in last["stderr"]
    assert last["note"].startswith("Shell commands cannot read the secret stores in the workspace (late/.env.local);")
    assert unrelated.structured_content["exit_code"] and unrelated.structured_content["note"] is None


@pytest.mark.usefixtures("need_sandbox")
def test_a_workspace_the_walk_cannot_cover_refuses_commands(rt: Runtime, workspace: Path) -> None:
    """Fail closed: a folder the walk cannot list (here a path past PATH_MAX, made through relative paths)
    could hold a secret store the sandbox would not cover, so no command runs, and the error says what to do."""
    from foundation.errors import LimitExceeded

    fd = os.open(workspace, os.O_RDONLY)
    try:
        for _ in range(45):
            os.mkdir("d" * 100, dir_fd=fd)
            inner = os.open("d" * 100, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    with pytest.raises(LimitExceeded, match="cannot run in this workspace.*narrower workspace root"):
        run(rt, "echo hi")


@pytest.mark.anyio
@pytest.mark.usefixtures("need_sandbox")
async def test_a_long_sandbox_command_line_goes_through_a_file_descriptor(make_settings: Any, workspace: Path,
                                                                           monkeypatch: Any) -> None:
    """Thousands of covered secret stores make bubblewrap's command line longer than exec takes (E2BIG): past
    ARGV_INLINE_BYTES it is handed over as `bwrap --args FD` (the bound lowered here to use that path)."""
    monkeypatch.setattr("tools.sandbox.ARGV_INLINE_BYTES", 512)
    for i in range(40):
        (workspace / f"d{i}").mkdir()
        (workspace / f"d{i}" / ".env").write_text(f"API_KEY={MARKER}\n")
    (workspace / "notes.txt").write_text("API_KEY is elsewhere\n")
    async with connect(make_settings(bash_enabled=True)) as client:
        said = await client.call_tool("run_bash_command", {"command": "grep -r API_KEY . ; echo end"})
    out = said.structured_content["stdout"]
    assert out.rstrip().endswith("end") and "notes.txt:API_KEY is elsewhere" in out and MARKER not in out, said


def test_repositories_reached_through_links_do_not_crowd_out_those_in_the_roots(make_settings: Any,
                                                                                 workspace: Path) -> None:
    """The guard's repository limit counts only repositories in the roots: a linked folder of 300 checkouts
    (sorting first) left `vendor/lib` unguarded (a new-user audit). A link out of the roots is not walked at
    all now (the sandbox shows nothing there), so the 300 are not even found."""
    from tools.bash import sandbox_spec
    from tools.workspace_scan import WorkspaceScan

    many = Path(tempfile.mkdtemp(prefix="ga-repos-", dir="/var/tmp"))
    try:
        for i in range(300):
            (many / f"r{i:03d}" / ".git").mkdir(parents=True)
        (workspace / "a").mkdir()
        (workspace / "a" / "src").symlink_to(many)  # walked before vendor/
        (workspace / "vendor" / "lib" / ".git" / "hooks").mkdir(parents=True)
        (workspace / "vendor" / "lib" / ".git" / "config").write_text("[core]\n")
        (workspace / "vendor" / "lib" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        roots = (Path(os.path.realpath(workspace)),)
        found = WorkspaceScan(lambda path: False).scan(roots)
        assert len(found.repos) == 1
        spec = sandbox_spec(make_settings(), roots, workspace / "home", found)
        assert roots[0] / "vendor/lib/.git/config" in spec.read_only and roots[0] / "vendor/lib/.git" in spec.pinned
    finally:
        shutil.rmtree(many, ignore_errors=True)


def _repo_with_a_commit(path: Path) -> None:
    _git(path, "init", "-q")
    (path / "a.txt").write_text("a\n")
    _git(path, "add", "a.txt")
    _git(path, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first")


def _stray(before: set[Path], root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if ".git" not in p.relative_to(root).parts[:1]} - before


@pytest.mark.usefixtures("need_sandbox")
def test_no_missing_git_config_or_hook_can_be_made_and_git_work_goes_on(rt: Runtime, workspace: Path) -> None:
    """Red team A (a, b): a `commondir` redirecting config and hooks to a planted folder, a hook in a missing
    `hooks` folder, a missing config.worktree: each is held by a read-only placeholder while the command runs
    (none is left behind), and add, commit, branch, checkout, stash and rebase still work."""
    _repo_with_a_commit(workspace)
    subprocess.run(["rm", "-rf", str(workspace / ".git" / "hooks")], check=True)
    before = {p for p in (workspace / ".git").iterdir()}
    plant = run(rt, "mkdir -p evil/hooks && cp .git/HEAD evil/ && printf '[core]\\n\\tfsmonitor = touch pwned\\n' "
                    "> evil/config; echo ../evil > .git/commondir; mkdir -p .git/hooks; "
                    "echo 'touch pwned' > .git/hooks/pre-commit; echo x > .git/config.worktree; echo ok > b.txt")
    assert {p for p in (workspace / ".git").iterdir()} == before, plant
    assert (workspace / "b.txt").is_file() and "commondir: Read-only" in plant.stderr, plant
    work = run(rt, "set -e; c='git -c user.name=t -c user.email=t@example.com'; git add b.txt; $c commit -qm two; "
                   "git checkout -qb side; echo s > s.txt; git add s.txt; $c commit -qm side; git checkout -q -; "
                   "echo c >> a.txt; $c commit -qam main; echo d > d.txt; git add d.txt; git stash -q; "
                   "git stash pop -q; $c stash -q; $c rebase -q side; git stash pop -q; git branch; git log --oneline")
    assert work.exit_code == 0 and "side" in work.stdout and "main" in work.stdout, work
    assert "main" in _git_out(workspace, "log", "--oneline") and not (workspace / "pwned").exists()
    _git_out(workspace, "status")  # the host's git reads the real repository: no fsmonitor to run
    assert not (workspace / "pwned").exists()


@pytest.mark.usefixtures("need_sandbox")
def test_the_hooks_path_and_included_config_files_stay_read_only(rt: Runtime, workspace: Path) -> None:
    """Red team A (c): core.hooksPath (`.husky`, `.githooks`: folders of the work tree, existing or not) and
    config files an include names (a tracked `.gitconfig`, a missing local one) are read-only too."""
    _repo_with_a_commit(workspace)
    _git(workspace, "config", "core.hooksPath", ".husky")
    _git(workspace, "config", "include.path", "../.gitconfig")
    _git(workspace, "config", "--add", "include.path", "../local.gitconfig")
    (workspace / ".husky").mkdir()
    (workspace / ".gitconfig").write_text("[user]\n\tname = t\n")
    result = run(rt, "echo 'touch pwned' > .husky/pre-commit; printf '[core]\\n\\tfsmonitor = touch pwned\\n' "
                     ">> .gitconfig; echo '[core]' > local.gitconfig; git status --short; echo ok > b.txt")
    assert not (workspace / ".husky" / "pre-commit").exists() and not (workspace / "local.gitconfig").exists()
    assert (workspace / ".gitconfig").read_text() == "[user]\n\tname = t\n" and (workspace / "b.txt").is_file(), result
    _git(workspace, "config", "core.hooksPath", ".githooks")  # a missing hooks folder
    result = run(rt, "mkdir -p .githooks && echo 'touch pwned' > .githooks/pre-commit; echo ok")
    assert not (workspace / ".githooks").exists() and result.note is None, result


@pytest.mark.usefixtures("need_sandbox")
def test_a_root_without_a_repository_of_its_own_cannot_become_one(make_settings: Any) -> None:
    """Red team A (d): a root that is a sub-folder of a repository (or of none) gets an empty read-only `.git`
    while a command runs: `git init` there fails (and says why), and a repository in a new sub-folder may be made.
    Nothing is left in the root. The repository above the root is outside it: not in the sandbox (an allow-list
    view), so git in the root finds none."""
    with tempfile.TemporaryDirectory(prefix="ga-newrepo-", dir="/var/tmp") as tmp:
        _no_repository_in_the_root(make_settings, Path(tmp) / "proj")


def _no_repository_in_the_root(make_settings: Any, proj: Path) -> None:
    root = proj / "src"
    root.mkdir(parents=True)
    _repo_with_a_commit(proj)
    rt = Runtime(make_settings(bash_enabled=True, roots=[root]))
    result = run(rt, "git init -q . && git config core.fsmonitor 'touch pwned'")
    assert result.exit_code and result.note == GIT_GUARD_NOTE, result
    assert not (root / ".git").exists() and list(root.iterdir()) == []
    above = run(rt, "git log --oneline")
    assert above.exit_code == 128 and "not a git repository" in above.stderr, above
    used = run(rt, "git init -q new && git -C new status --short && echo ok")
    assert used.exit_code == 0 and "ok" in used.stdout, used
    assert (root / "new" / ".git").is_dir() and not (root / ".git").exists()


@pytest.mark.usefixtures("need_sandbox")
def test_a_linked_worktrees_commondir_stays_put(make_settings: Any, workspace: Path, tmp_path: Path) -> None:
    """The git folder of a worktree kept in the root's repository (`.git/worktrees/<name>`, the worktree itself
    outside the roots) cannot be redirected to planted config."""
    _repo_with_a_commit(workspace)
    _git(workspace, "worktree", "add", "-q", str(tmp_path / "tree"))
    kept = next((workspace / ".git" / "worktrees").iterdir())
    before = (kept / "commondir").read_text()
    rt = Runtime(make_settings(bash_enabled=True))
    result = run(rt, f"echo {workspace}/evil > .git/worktrees/{kept.name}/commondir; "
                     f"echo x > .git/worktrees/{kept.name}/config.worktree; echo ok")
    assert (kept / "commondir").read_text() == before and not (kept / "config.worktree").exists(), result


_NAME = st.text(alphabet="abcdefgh.-_ ", min_size=1, max_size=8).filter(lambda n: n.strip(" .") == n and n)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(includes=st.lists(st.tuples(st.sampled_from(["", "sub/", "../", "sub/../"]), _NAME), max_size=4),
       nested=st.booleans(), hooks=st.lists(st.sampled_from([".husky", ".githooks", "sub dir/h", "/abs/h"]),
                                            max_size=2))
def test_every_config_file_git_reads_and_its_hooks_path_are_found(tmp_path_factory: Any, includes: list[tuple[str, str]],
                                                                  nested: bool, hooks: list[str]) -> None:
    """Whatever includes (relative to the including file, missing or not, nested) and core.hooksPath values a
    repository's config holds: every file git itself reads for it is among config_reads' files, every file an
    include names too, and the hooks folder is git's own core.hooksPath, relative to the worktree."""
    from tools.sandbox_git import config_reads

    top = tmp_path_factory.mktemp("repo")
    _git(top, "init", "-q")
    (top / "sub").mkdir()
    config = top / ".git" / "config"
    named = []
    for place, name in includes:
        target = (config.parent / place / name).resolve()
        named.append(target)
        _git(top, "config", "--add", "include.path", place + name)
        if nested and (config.parent / place).is_dir():  # git can open it (`sub/..` needs `sub`)
            target.write_text(f"[include]\n\tpath = {name}.more\n")
            named.append(target.parent / f"{name}.more")
    for value in hooks:
        _git(top, "config", "--add", "core.hooksPath", value)
    read, found_hooks = config_reads(top / ".git", top)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    listed = subprocess.run(["git", "config", "--list", "--show-origin", "--includes", "-z"], cwd=top, env=env,
                            capture_output=True, text=True, check=True).stdout.split("\0")[::2]
    origins = {(top / o[len("file:"):]).resolve() for o in listed if o.startswith("file:")}
    assert origins <= {p.resolve() for p in read} and {p.resolve() for p in named} <= {p.resolve() for p in read}
    assert found_hooks == (None if not hooks else Path(os.path.realpath(top / hooks[-1])))


@pytest.fixture
def host_unix_service() -> Any:
    """A host service on a Unix socket outside /tmp and /run (like /var/snap/lxd/common/lxd/unix.socket), and on
    an abstract-namespace one; yields (socket path, abstract name, what the service received)."""
    folder = Path(tempfile.mkdtemp(prefix="ga-sock-", dir="/var/tmp"))
    received: list[bytes] = []
    servers = [socket.socket(socket.AF_UNIX), socket.socket(socket.AF_UNIX)]
    abstract = f"\0ga-test-{folder.name}"
    servers[0].bind(str(folder / "svc.sock"))
    servers[1].bind(abstract)
    for server in servers:
        server.listen(4)

        def serve(server: socket.socket = server) -> None:
            try:
                while True:
                    conn = server.accept()[0]
                    received.append(conn.recv(100))
                    conn.sendall(b"hello-from-host")
                    conn.close()
            except OSError:
                return

        threading.Thread(target=serve, daemon=True).start()
    try:
        yield folder / "svc.sock", abstract, received
    finally:
        for server in servers:
            server.close()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.usefixtures("need_sandbox")
@pytest.mark.parametrize("network", [False, True])
def test_no_unix_socket_reaches_the_host(make_settings: Any, workspace: Path, host_unix_service: Any,
                                         network: bool) -> None:
    """A read-only file system does not stop connect() on a host service's socket file (lxd, docker, mysql):
    the seccomp filter refuses socket(AF_UNIX), network on or off (then the host's abstract sockets are
    reachable too), and a datagram pair (which could sendto() anywhere); connected pairs still work."""
    path, abstract, received = host_unix_service
    (workspace / "probe.py").write_text(
        "import socket, sys\n"
        "for target in sys.argv[1:]:\n"
        "    try:\n"
        "        s = socket.socket(socket.AF_UNIX); s.connect(target.replace('@', '\\0', 1)); s.sendall(b'in')\n"
        "        print('CONNECTED', s.recv(100))\n"
        "    except OSError as exc:\n"
        "        print('refused', exc)\n"
        "try:\n"
        "    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b'x', sys.argv[1])\n"
        "    print('DGRAM PAIR')\n"
        "except OSError as exc:\n"
        "    print('refused', exc)\n")
    rt = shell_runtime(make_settings(bash_enabled=True, bash_network=network))
    result = run(rt, f"python3 probe.py {path} @{abstract[1:]}")
    assert result.stdout.count("refused [Errno 1] Operation not permitted") == 3, result
    assert "CONNECTED" not in result.stdout and not received, result


@pytest.mark.usefixtures("need_sandbox")
def test_ordinary_local_ipc_still_works(rt: Runtime, workspace: Path) -> None:
    """What common tools need of sockets without the network: socketpair (asyncio, multiprocessing), pipes,
    git, shell pipelines."""
    (workspace / "a.txt").write_text("alpha\nbeta\n")
    script = (
        "import asyncio, multiprocessing, socket\n"
        "if __name__ == '__main__':\n"
        "    a, b = socket.socketpair(); a.sendall(b'pair'); print(b.recv(4).decode())\n"
        "    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET); a.send(b'seq'); print(b.recv(3).decode())\n"
        "    print(asyncio.run(asyncio.sleep(0, 'loop')))\n"
        "    with multiprocessing.get_context('spawn').Pool(2) as pool: print(sum(pool.map(abs, [-1, -2])))\n"
        "    r, w = multiprocessing.Pipe(); w.send('pipe'); print(r.recv())\n")
    (workspace / "ipc.py").write_text(script)
    _git(workspace, "init", "-q")  # a root's own repository is made outside: the sandbox makes none in a root
    result = run(rt, "python3 ipc.py && git add a.txt && git status --short a.txt && grep -c a a.txt | cat"
                     " && sort a.txt | head -1")
    assert result.exit_code == 0, result
    assert result.stdout.split() == ["pair", "seq", "loop", "3", "pipe", "A", "a.txt", "2", "alpha"], result


HOME_STORES = (".ssh/id_rsa", ".vault-token", ".env", ".cargo/credentials.toml", ".cargo/credentials", ".aws/config",
               ".config/gcloud/token", ".docker/config.json", ".kube/config", ".npmrc", ".pypirc", ".git-credentials",
               ".gnupg/key", ".config/gh/hosts.yml", ".netrc", ".pgpass", ".config/hub", ".password-store/x.gpg",
               ".envrc", "id_ed25519", ".mytool/session.key")
HOME_ORDINARY = ("notes.txt", ".bashrc", ".config/app/settings.toml", ".cargo/config.toml", ".docker/contexts/meta.json",
                 ".kube/cache/discovery", ".config/gh/config.yml", "projects/app/src/main.py")


@pytest.mark.usefixtures("need_sandbox")
def test_the_secret_stores_the_policy_names_in_the_home_cannot_be_read(make_settings: Any, workspace: Path,
                                                                       monkeypatch: Any) -> None:
    """The red team read ~/.vault-token, ~/.env and ~/.cargo/credentials.toml (the sandbox had its own, shorter
    list). Nothing of the home is visible when no root holds it (the sandbox's view is an allow-list); with the
    home as a root, what the policy's secret patterns name in it, the user's own too, is hidden, its other files
    stay readable, and a tool installed there still runs. The home lies outside /tmp (the sandbox's /tmp is its
    own)."""
    home = Path(tempfile.mkdtemp(prefix="ga-home-", dir="/var/tmp"))
    try:
        for name in (*HOME_STORES, *HOME_ORDINARY):
            (home / name).parent.mkdir(parents=True, exist_ok=True)
            (home / name).write_text(f"{MARKER} {name}\n")
        (home / ".local" / "bin").mkdir(parents=True)
        (home / ".local" / "bin" / "tool").write_text("#!/bin/sh\necho tool-ran\n")
        (home / ".local" / "bin" / "tool").chmod(0o755)
        rules = workspace.parent / "rules.toml"
        rules.write_text("[secrets]\ndeny = ['(^|/)\\.mytool/session\\.key$']\n")
        monkeypatch.setenv("HOME", str(home))
        names = " ".join(f"{home}/{name}" for name in (*HOME_STORES, *HOME_ORDINARY))
        command = f"for f in {names}; do cat $f 2>/dev/null; done; {home}/.local/bin/tool"
        read = (home / ".cargo", home / ".local")  # bash_read_paths: the user lets commands read these
        for roots, paths, expected in (([workspace], (), set()), ([workspace, home], (), set(HOME_ORDINARY)),
                                       ([workspace], read, {".cargo/config.toml"})):
            rt = shell_runtime(make_settings(bash_enabled=True, policy_file=rules, roots=roots, bash_read_paths=paths))
            result = run(rt, command + f"; touch {home}/.cargo/new-{len(paths)} 2>/dev/null")
            shown = {line.split(" ", 1)[1] for line in result.stdout.splitlines() if line.startswith(MARKER)}
            assert shown == expected, result
            assert ("tool-ran" in result.stdout) == bool(expected), result
        assert not (home / ".cargo" / "new-2").exists()  # a read path is read-only
    finally:
        shutil.rmtree(home, ignore_errors=True)
