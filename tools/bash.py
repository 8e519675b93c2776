"""run_bash_command: one shell command in the workspace, inside the OS sandbox (tools/sandbox.py)
when one works here, with a scrubbed environment, a private empty HOME (no user or system git
config), bounded output and a hard time limit that kills the command's whole process group.

Disabled unless settings.bash_enabled. Whether a command may run at all is decided by the
policy at the dispatch point; this module only makes running it safe and bounded.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Annotated

from pydantic import BaseModel, Field

from foundation.bounding import MAX_COMMAND_CHARS
from foundation.errors import InvalidInput, LimitExceeded, NotConfigured
from foundation.paths import display_path, is_within, roots_for, server_data_dirs
from foundation.settings import Settings
from tools.env_secrets import secret_value
from tools.runtime import CallContext, Runtime, Service
from tools.sandbox import (
    SYSTEM_SECRETS,
    SandboxSpec,
    launch,
    make_stubs,
    placeholders,
    remove_placeholders,
    sandbox_status,
    wrap,
)
from tools.sandbox_git import GitGuards, git_guards, neutral_git_env, sanitized_configs
from tools.sandbox_net import NetworkSetupError, Outbound
from tools.workspace_scan import WorkspaceScan, WorkspaceScanResult, home_scan

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|CREDENTIAL|PRIVATE|AUTH|COOKIE", re.IGNORECASE)
SECRET_VALUE = re.compile(
    r"://[^/\s:@]+:[^/\s@]+@"  # credentials in a URL (DATABASE_URL=postgres://user:pass@host)
    r"|-----BEGIN [A-Z ]*PRIVATE KEY"
    r"|^(?:sk-|ghp_|gho_|ghs_|github_pat_|glpat-|xox[abprs]-|AKIA[0-9A-Z]{16})"
)
DROPPED_PREFIXES = ("GENERALAGENT_",)
STDOUT_HEAD, STDOUT_TAIL = 12_000, 6_000
STDERR_HEAD, STDERR_TAIL = 3_000, 3_000
EXIT_GRACE_SECONDS = 0.5  # after the shell exits, how long background children may keep the pipes
GIT_GUARD_ERRORS = ("Device or resource busy", "Read-only file system", "Permission denied")  # a write to a read-only bind mount
GIT_GUARD_NAMES = (".git/config", "config.worktree", ".git/hooks")
SCANS_KEPT = 32  # workspaces whose secret scan is kept (each HTTP session may have its own)
READ_ONLY_NOTE = ("This command ran without the user's approval (the approval policy lets it run as one that "
                  "writes nothing), so the workspace was read-only. To change files use write_file or edit_file, or a "
                  "command whose writes are visible (a `> file` redirection, cp, mv), which asks the user.")
GIT_GUARD_NOTE = ("The sandbox keeps the repository's git config and hooks read-only (and makes no repository in a "
                  "workspace root): change them with edit_file (which asks the user) or ask the user to run the command.")


def scrubbed_env(environ: Mapping[str, str], workspace: Path, home: Path) -> dict[str, str]:
    """The server's environment minus secrets (by name or by well-known value shapes) and our own
    settings, with PWD = the workspace, HOME = a private empty folder and no user/system git config
    (a `.gitconfig` in the workspace must not become git's global config)."""
    env = {
        name: value
        for name, value in environ.items()
        if not SECRET_NAME.search(name)
        and not name.upper().startswith(DROPPED_PREFIXES)
        and not SECRET_VALUE.search(value)
        and not secret_value(value)  # by shape: `redis://:pw@`, DSNs, webhook URLs, bare keys (env_secrets.py)
    }
    env.update(HOME=str(home), PWD=str(workspace), XDG_CONFIG_HOME=str(home / ".config"),
               GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    env.setdefault("PATH", os.defpath)
    env.setdefault("LANG", "C.UTF-8")
    return env


class _Capture:
    """Keeps the first `head` and the last `tail` bytes of a stream and counts the rest."""

    def __init__(self, head: int, tail: int) -> None:
        self.head_limit, self.tail_limit = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            del self.tail[: max(0, len(self.tail) - self.tail_limit)]

    def text(self) -> str:
        if not self.truncated:
            return (self.head + self.tail).decode("utf-8", "replace")
        dropped = self.total - len(self.head) - len(self.tail)
        return f"{self.head.decode('utf-8', 'replace')}\n…[{dropped} bytes omitted]…\n{self.tail.decode('utf-8', 'replace')}"

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)


class BashResult(BaseModel):
    exit_code: int | None = Field(description="Null when killed.")
    timed_out: bool
    stdout: str = Field(description="Head and tail kept when long.")
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    output_truncated: bool
    duration_ms: int
    cwd: str
    note: str | None = None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _pump(
    proc: subprocess.Popen[bytes], captures: dict[IO[bytes], _Capture], deadline: float, call: CallContext
) -> bool:
    """Read both pipes until EOF or the deadline; returns True when the deadline passed."""
    selector = selectors.DefaultSelector()
    by_fd = {stream.fileno(): capture for stream, capture in captures.items()}
    for stream in captures:
        os.set_blocking(stream.fileno(), False)
        selector.register(stream, selectors.EVENT_READ)
    exited_at: float | None = None
    try:
        while selector.get_map():
            now = time.monotonic()
            if now >= deadline:
                return True
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > EXIT_GRACE_SECONDS:
                break  # background children still hold the pipes; they are killed next
            call.check_cancelled()
            for key, _ in selector.select(timeout=min(0.2, deadline - now)):
                chunk = os.read(key.fd, 65536)
                if chunk:
                    by_fd[key.fd].add(chunk)
                else:
                    selector.unregister(key.fileobj)
    finally:
        selector.close()
    try:  # the pipes are closed; the shell may still run (it closed its outputs)
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return True
    return False


def _shell() -> str:
    return shutil.which("bash") or "/bin/sh"


def run_bash_command(
    command: Annotated[str, Field(min_length=1, description="Bash command line.")],
    timeout: Annotated[int, Field(ge=1, le=600, description="Seconds before it is killed.")] = 30,
    *,
    rt: Runtime,
    call: CallContext,
) -> BashResult:
    """Run a bash command in the workspace root (no stdin, secrets removed from the environment);
    it and its children are killed at the timeout. Commands the user did not approve run with the workspace
    read-only (and git runs no program its repository config names). The repository's git config and hooks are
    read-only;
    secret stores in the workspace (.env files, private keys, .ssh) cannot be read; Unix sockets cannot be
    opened (serve on 127.0.0.1 instead)."""
    if not rt.settings.bash_enabled:
        # No command line to retype: the server's own (its client's configuration) gains one word.
        raise NotConfigured(
            "run_bash_command is disabled. To enable it, set GENERALAGENT_BASH_ENABLED=1 in the server's "
            "environment or add --enable-bash after `serve` in its arguments (in the MCP client's configuration, "
            "or the command that started it), then restart the server."
        )
    if "\x00" in command or len(command) > MAX_COMMAND_CHARS:
        raise InvalidInput(f"The command must be at most {MAX_COMMAND_CHARS} characters without NUL bytes; "
                           "write longer scripts to a file and run that.")
    roots = roots_for(rt.settings, call.session_id)
    sandboxed = sandbox_status().available
    found = scan_workspace(rt, roots) if sandboxed else WorkspaceScanResult((), ())
    in_home = scan_home(rt) if sandboxed else ()
    if found.unchecked is not None:
        raise LimitExceeded(f"Shell commands cannot run in this workspace: the sandbox checks it for secret stores "
                            f"first, but {found.unchecked}. Use a narrower workspace root, or ask the user to run "
                            "the command.")
    writable = call.consent == "person" or not sandboxed  # (unsandboxed: every command was asked)
    with tempfile.TemporaryDirectory(prefix="generalagent-home-") as home:
        spec = sandbox_spec(rt.settings, roots, Path(os.path.realpath(home)), found, in_home, guard_git=sandboxed,
                            writable=writable)
        made = placeholders(spec) if sandbox_status().kind == "bwrap" else []
        git = {} if writable else neutral_git_env(spec.git_programs)
        try:
            result = _run(command_argv(command, spec), spec, timeout, call, git)
        finally:
            remove_placeholders(made)
    if sandboxed and not writable and result.exit_code and "Read-only file system" in result.stderr:
        result.note = READ_ONLY_NOTE
    elif sandboxed and _hit_git_guard(result, spec, _git_guarded(spec, rt.settings)):
        result.note = GIT_GUARD_NOTE
    elif found.secrets and result.exit_code:
        result.note = hidden_secrets_note(found.secrets, roots, result.stderr + result.stdout)
    return result


def scan_workspace(rt: Runtime, roots: tuple[Path, ...]) -> WorkspaceScanResult:
    """The secret stores inside `roots` (the policy's deny patterns), hidden from every command, and the
    repositories in them, whose git config and hooks stay read-only."""
    policy = rt.secret_paths

    def is_secret(path: str) -> bool:
        return policy is not None and policy.store(path, roots)

    scans = _WORKSPACE_SCANS.of(rt)
    with scans.lock:
        scan = scans.kept.pop(roots, None) or WorkspaceScan(is_secret)
        scans.kept[roots] = scan  # the most recent last
        while len(scans.kept) > SCANS_KEPT:
            scans.kept.pop(next(iter(scans.kept)))
    return scan.scan(roots)


def scan_home(rt: Runtime) -> tuple[Path, ...]:
    """What of the user's home commands may not see: the secret stores the policy names in it (tools/workspace_scan.py
    `home_scan`: its top, dot-folders and their sub-folders), or all of it when that walk is incomplete or
    there is no policy to ask (fail closed)."""
    home = Path(os.path.realpath(os.path.expanduser("~")))
    policy = rt.secret_paths
    if policy is None:
        return () if home == Path("/") else (home,)
    scan = _HOME_SCANS.of(rt)
    with scan.lock:
        if scan.home != home:
            scan.home, scan.walk = home, home_scan(lambda path: policy.home_store(path, home))
        found = scan.walk.scan((home,)) if scan.walk is not None else None
    if found is None or found.unchecked is not None:
        return (home,)
    return found.secrets


def warm_up_workspace_scan(rt: Runtime) -> None:
    """The first walk of the default workspace, at start-up (about 25 µs a file) instead of in the first command."""
    if rt.settings.bash_enabled and sandbox_status().available:
        scan_workspace(rt, roots_for(rt.settings, None))
        scan_home(rt)


def hidden_secrets_note(hidden: tuple[Path, ...], roots: tuple[Path, ...], output: str) -> str | None:
    """What a failed command is told of the secret stores in the roots that its output names (else nothing)."""
    def named(name: str) -> bool:
        return re.search(rf"(?<![\w./-])(\./)?{re.escape(name)}(?![\w./-])", output) is not None

    names = [name for name in (display_path(p, roots) for p in _in_roots(hidden, roots))
             if name in output and named(name)]
    if not names:
        return None
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return (f"Shell commands cannot read the secret stores in the workspace ({', '.join(names[:3])}{more}); the "
            "approval policy lets no tool read them. A program that needs them has to be run by the user.")


def sandbox_spec(settings: Settings, roots: tuple[Path, ...], home: Path, scanned: WorkspaceScanResult | None = None,
                 in_home: tuple[Path, ...] = (), *, guard_git: bool = True, writable: bool = False) -> SandboxSpec:
    """What a command may see and change: the roots (the first is the working folder), a private
    HOME; not the server's data folder, the system's secret stores, those in the user's home (`in_home`:
    `scan_home`) or the secret stores inside the roots (`scanned`);
    what the file tools may not write stays read-only (the rules, agents and skills files, skill folders:
    existing or not), and so do the git config and hooks of each root and of the repositories in them
    (`guard_git`: False without a sandbox, where nothing would use them). `writable`: the roots may be written
    (a person let the command run); else every root is read-only."""
    files = tuple(Path(os.path.realpath(p)) for p in (settings.policy_file, settings.agents_file, settings.skills_file)
                  if p)
    folders = tuple(Path(os.path.realpath(d)) for d in settings.skills_dirs)
    found = scanned or WorkspaceScanResult((), ())
    git = git_guards(roots, _in_roots(found.repos, roots)) if guard_git else GitGuards()
    stubs = make_stubs(Path(settings.data_dir) / "sandbox")
    overlays = () if writable or stubs is None else sanitized_configs(git.programs, stubs / "configs")
    hidden = (*server_data_dirs(settings), *SYSTEM_SECRETS, *in_home)
    return SandboxSpec(roots=roots, cwd=roots[0], home=home, hidden=hidden, covered=found.secrets,
                       read_only=(*files, *git.files), read_only_folders=(*folders, *git.folders), pinned=git.pinned,
                       commondirs=git.commondirs, network=settings.bash_network, roots_writable=writable,
                       git_programs=git.programs, overlays=overlays, stubs=stubs, readable=settings.bash_read_paths)


def _in_roots(paths: tuple[Path, ...], roots: tuple[Path, ...]) -> list[Path]:
    """The (resolved) `paths` that lie in the roots; the walk also meets some through links out of them."""
    real_roots = [Path(os.path.realpath(root)) for root in roots]
    return [path for path in paths if is_within(path, real_roots)]


def _git_guarded(spec: SandboxSpec, settings: Settings) -> list[Path]:
    """The read-only paths of `spec` that guard git (not the rules, agents and skills files)."""
    ours = {os.path.realpath(p) for p in (settings.policy_file, settings.agents_file, settings.skills_file,
                                          *settings.skills_dirs) if p}
    return [p for p in (*spec.read_only, *spec.read_only_folders, *spec.commondirs) if str(p) not in ours]


def _hit_git_guard(result: BashResult, spec: SandboxSpec, guarded: list[Path]) -> bool:
    """Whether the command failed writing a read-only git config, hook or `.git` (stderr names one of them,
    as given or resolved, and the error a read-only bind mount gives)."""
    if not result.exit_code or not any(error in result.stderr for error in GIT_GUARD_ERRORS):
        return False
    names = {*GIT_GUARD_NAMES, *(str(p) for p in guarded), *(os.path.relpath(p, spec.cwd) for p in guarded)}
    return any(name in result.stderr for name in names)


def command_argv(command: str, spec: SandboxSpec) -> list[str]:
    """The argv that runs `command`: inside the OS sandbox when one works here, else plain bash."""
    argv = [_shell(), "-c", command]
    status = sandbox_status()
    return wrap(argv, spec, status) if status.available else argv


def _connect(proc: subprocess.Popen[bytes], outbound: Outbound | None) -> None:
    """Give the started command its outbound-only network (it waits for it); if that fails, it dies unstarted."""
    if outbound is None:
        return
    try:
        outbound.start()
    except NetworkSetupError:
        _kill_group(proc)
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        outbound.close()
        raise


def _run(argv: list[str], spec: SandboxSpec, timeout: int, call: CallContext,
         git_env: Mapping[str, str] | None = None) -> BashResult:
    """Run `argv`; `git_env` (read-only runs: `neutral_git_env`) replaces every GIT_ variable of the server's."""
    workspace = spec.cwd
    started = time.monotonic()
    env = scrubbed_env(os.environ, workspace, spec.home)
    if git_env:
        env = {k: v for k, v in env.items() if not k.startswith("GIT_") or k in ("GIT_CONFIG_GLOBAL",
                                                                               "GIT_CONFIG_NOSYSTEM")}
        env.update(git_env)
    try:
        with launch(argv, spec.network) as (short, fds, outbound):
            proc = subprocess.Popen(
                short, cwd=workspace, env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, close_fds=True, pass_fds=fds,
            )
            _connect(proc, outbound)
    except NetworkSetupError as exc:
        raise NotConfigured(f"{exc}. The command did not run; turn bash_network off to run commands without a "
                            "network, or fix the above and try again.") from None
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Capture(STDOUT_HEAD, STDOUT_TAIL), _Capture(STDERR_HEAD, STDERR_TAIL)
    try:
        timed_out = _pump(proc, {proc.stdout: out, proc.stderr: err}, started + timeout, call)
        code = None if timed_out else proc.poll()
    finally:
        _kill_group(proc)  # the timed-out command, or background children left behind
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        if outbound is not None:
            outbound.close()
    return BashResult(
        exit_code=code, timed_out=timed_out,
        stdout=out.text(), stderr=err.text() + (f"\n[killed after {timeout} s]" if timed_out else ""),
        stdout_bytes=out.total, stderr_bytes=err.total, output_truncated=out.truncated or err.truncated,
        duration_ms=int((time.monotonic() - started) * 1000), cwd=str(workspace),
    )


@dataclass
class _WorkspaceScans:
    kept: dict[tuple[Path, ...], WorkspaceScan] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_WORKSPACE_SCANS: Service[_WorkspaceScans] = Service(lambda rt: _WorkspaceScans())


@dataclass
class _HomeScan:
    home: Path | None = None
    walk: WorkspaceScan | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


_HOME_SCANS: Service[_HomeScan] = Service(lambda rt: _HomeScan())
