"""The OS sandbox under every shell command: bubblewrap on Linux, sandbox-exec (Seatbelt) on macOS.

The approval policy decides whether a command may run; the sandbox limits what a command that
runs can do, so that a hole in the command parser is harmless:

- the workspace roots are writable, the rest of the file system is read-only;
- the server's data folder, secret stores (~/.ssh, ~/.aws, ~/.gnupg, ~/.config/gcloud, ...) and
  /run (docker and agent sockets) are not visible; the rules, agents and skills files and the skill
  folders stay read-only (a missing one too: an empty read-only placeholder holds its place while the
  command runs, removed after it);
- the git config and hooks of a root's repository and of those nested in the roots (`root/proj/.git`,
  submodules; tools/workspace_scan.py finds them) stay read-only and their `.git` cannot be renamed or
  replaced (git commands still work: objects, refs and the index are written as usual), so a command cannot
  plant git config or hooks that a later git run outside the sandbox would execute. The git folders a
  `.git` file names are guarded too; a repository made by the command itself is not (it holds nothing yet);
- the secret stores inside the roots (`tools/workspace_scan.py`: the policy's deny patterns, `.env`, keys) cannot be
  read: each is covered by an empty device (a folder: an empty folder), like the ones under HOME;
- a fresh /proc in a new pid namespace: other processes (and their environ) are not visible;
- a private, empty HOME and /tmp; no network unless the user enables it (`bash_network`);
- the command dies with the server (--die-with-parent) and cannot reach the terminal (--new-session).

`sandbox_status()` says whether a sandbox works here (found on PATH AND a trivial command ran
in it: bubblewrap can fail inside some containers); it is checked once and cached.
`wrap(argv, spec)` returns the argv that runs `argv` inside it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

SECRET_HOME_ENTRIES = (
    ".ssh", ".aws", ".gnupg", ".config/gcloud", ".azure", ".kube", ".docker", ".config/gh",
    ".netrc", ".git-credentials", ".pgpass", ".npmrc", ".pypirc", ".config/hub", ".password-store",
)
"""Secret stores under the user's home that no sandboxed command may read."""
SYSTEM_SECRETS = (Path("/var/run/docker.sock"), Path("/var/run/containerd"), Path("/var/run/secrets"))
"""Outside /run (hidden as a whole): container-runtime sockets and mounted service-account secrets."""
PRIVATE_MOUNTS = (Path("/tmp"), Path("/run"))
"""Empty in the sandbox (a tmpfs each): nothing of the host's is visible there unless a root brings it back."""
FRESH_MOUNTS = (Path("/proc"), Path("/dev"))
"""The sandbox's own: its processes only, a minimal /dev."""
INSTALL_HINT = {
    "linux": "install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`; Fedora: `sudo dnf install "
             "bubblewrap`), then restart the server",
    "darwin": "sandbox-exec ships with macOS; check that /usr/bin/sandbox-exec exists",
}
_PROBE_TIMEOUT = 15.0


@dataclass(frozen=True)
class SandboxStatus:
    available: bool
    kind: str  # "bwrap", "sandbox-exec" or "none"
    reason: str  # what works, or why not and how to fix it
    executable: str = ""  # the sandbox program that was probed (bwrap), used for every command


@dataclass(frozen=True)
class SandboxSpec:
    """What one sandboxed command may see and change."""

    roots: tuple[Path, ...]
    cwd: Path
    home: Path  # a private, empty folder used as HOME (writable)
    hidden: tuple[Path, ...] = ()  # not visible at all (folders and files)
    read_only: tuple[Path, ...] = ()  # files inside the roots that must stay read-only (missing ones too)
    network: bool = False
    extra_writable: tuple[Path, ...] = ()
    read_only_folders: tuple[Path, ...] = ()  # folders likewise (a missing one cannot be made either)
    pinned: tuple[Path, ...] = ()  # folders that stay writable but cannot be renamed, removed or replaced (.git)
    covered: tuple[Path, ...] = ()  # secret stores inside the roots: unreadable, mounted after everything else


def git_guards(roots: Iterable[Path]) -> tuple[tuple[Path, ...], tuple[Path, ...], tuple[Path, ...]]:
    """What keeps a root's git configuration out of a command's reach: (pinned: its git folders; read-only
    files: config, config.worktree and a `.git` file naming the git folder; read-only folders: hooks).
    Only what exists; a worktree's or submodule's `.git` file leads to its git folder and the common one."""
    pinned: list[Path] = []
    files: list[Path] = []
    folders: list[Path] = []
    for root in roots:
        dot = root / ".git"
        if dot.is_symlink():
            continue
        if dot.is_dir():
            gitdirs = [dot]
        elif dot.is_file():
            files.append(dot)
            gitdirs = _gitfile_dirs(dot)
        else:
            continue
        for gitdir in gitdirs:
            pinned.append(gitdir)
            files += [f for f in (gitdir / "config", gitdir / "config.worktree") if f.is_file()]
            folders += [d for d in (gitdir / "hooks",) if d.is_dir() and not d.is_symlink()]
    return tuple(dict.fromkeys(pinned)), tuple(dict.fromkeys(files)), tuple(dict.fromkeys(folders))


def _gitfile_dirs(dot: Path) -> list[Path]:
    """The git folder a `.git` file names (`gitdir: ...`) and its common folder (`commondir`), resolved."""
    try:
        text = dot.read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return []
    line = next((ln for ln in text.splitlines() if ln.startswith("gitdir:")), None)
    if line is None:
        return []
    gitdir = Path(os.path.realpath(dot.parent / line[len("gitdir:"):].strip()))
    if not (gitdir / "HEAD").is_file():  # not a git folder (a planted `gitdir: .ssh` names any folder)
        return []
    out = [gitdir]
    with contextlib.suppress(OSError):
        common = (gitdir / "commondir").read_text(encoding="utf-8", errors="replace").strip()
        if common and (found := Path(os.path.realpath(gitdir / common))).is_dir():
            out.append(found)
    return out


def secret_paths(home: Path | None = None) -> tuple[Path, ...]:
    """The secret stores under `home` (default: the server user's home)."""
    base = home if home is not None else Path(os.path.expanduser("~"))
    return (*(base / entry for entry in SECRET_HOME_ENTRIES), *SYSTEM_SECRETS)


# -- Linux: bubblewrap -------------------------------------------------------------------------


def _existing(paths: Iterable[Path]) -> list[Path]:
    return [p for p in paths if os.path.lexists(p)]


def _inside(path: Path, folders: Iterable[Path]) -> bool:
    return any(path != f and path.is_relative_to(f) for f in folders)


def _visible(path: Path, writable: Iterable[Path]) -> bool:
    """Under the private /tmp and /run only what a writable root brings back is visible."""
    return not any(path.is_relative_to(p) for p in PRIVATE_MOUNTS) or any(path.is_relative_to(w) for w in writable)


def _mount_order(paths: Iterable[Path], writable: Iterable[Path]) -> list[Path]:
    """The existing `paths` resolved (a linked ~/.ssh: its target), those the command can see, parents first."""
    real = {Path(os.path.realpath(p)) for p in _existing(paths)}
    return sorted((p for p in real if _visible(p, writable)), key=lambda p: len(p.parts))


def _hide_args(paths: Iterable[Path]) -> list[str]:
    args: list[str] = []
    for path in paths:
        if path.is_symlink():
            continue
        if path.is_dir():
            args += ["--tmpfs", str(path)]
        else:  # a file or a socket (docker.sock): covered by an empty device
            args += ["--ro-bind", "/dev/null", str(path)]
    return args


def _writable_place(path: Path, writable: Iterable[Path]) -> bool:
    """A command could change `path` (it lies in a writable folder): read-only is needed."""
    return any(path != w and path.is_relative_to(w) for w in writable)


def placeholders(spec: SandboxSpec) -> list[tuple[Path, bool]]:
    """Where a missing read-only path is held by an empty read-only placeholder: its topmost missing
    folder (True: a folder) or the path itself (False: a file). bubblewrap creates these on the host as
    mount points; `remove_placeholders` removes them after the command."""
    writable = {*spec.roots, *spec.extra_writable}
    out: dict[Path, bool] = {}
    for path, folder in [*((p, False) for p in spec.read_only), *((p, True) for p in spec.read_only_folders)]:
        if os.path.lexists(path) or not _writable_place(path, writable):
            continue
        top = path
        while not os.path.lexists(top.parent) and _writable_place(top.parent, writable):
            top = top.parent
        out.setdefault(top, folder or top != path)
    return list(out.items())


def remove_placeholders(made: Iterable[tuple[Path, bool]]) -> None:
    """Remove the placeholders bubblewrap left (only while they are still empty: nothing else is touched)."""
    for path, folder in made:
        with contextlib.suppress(OSError):
            if folder:
                path.rmdir()  # only an empty folder
            elif (info := path.lstat()) and stat.S_ISREG(info.st_mode) and info.st_size == 0 \
                    and stat.S_IMODE(info.st_mode) == 0o444:  # as bubblewrap makes a file mount point
                path.unlink()


def _read_only_args(spec: SandboxSpec, writable: list[Path]) -> list[str]:
    """Pinned folders bound onto themselves (a mount point cannot be renamed or removed), then the
    read-only files and folders; missing ones get an empty read-only placeholder."""
    args: list[str] = []
    for path in spec.pinned:
        if path.is_dir() and _writable_place(path, writable):
            args += ["--bind", str(path), str(path)]
    for path in [*spec.read_only, *spec.read_only_folders]:
        if os.path.lexists(path) and _writable_place(path, writable):
            args += ["--ro-bind", str(path), str(path)]
    for path, folder in placeholders(spec):
        args += ["--tmpfs", str(path), "--remount-ro", str(path)] if folder else ["--ro-bind", "/dev/null", str(path)]
    return args


def _resolv_conf_args() -> list[str]:
    """/etc/resolv.conf often links into /run (hidden): bind its target back, read-only."""
    target = Path(os.path.realpath("/etc/resolv.conf"))
    if target.is_relative_to("/run") and target.is_file():
        return ["--ro-bind", str(target), str(target)]
    return []


def bwrap_argv(argv: Sequence[str], spec: SandboxSpec, bwrap: str = "bwrap") -> list[str]:
    """The bubblewrap command line that runs `argv` under `spec` (later mounts cover earlier ones)."""
    writable = sorted({*spec.roots, *spec.extra_writable}, key=lambda p: len(p.parts))
    hidden = _mount_order(spec.hidden, writable)
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    if spec.network:
        args.append("--share-net")
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    if Path("/run").is_dir():
        args += ["--tmpfs", "/run", *(_resolv_conf_args() if spec.network else [])]
    for path in writable:
        args += ["--bind", str(path), str(path)]
    args += _hide_args(hidden)
    for path in writable:  # a root inside a hidden folder (the default workspace in the data dir)
        if _inside(path, hidden):
            args += ["--bind", str(path), str(path)]
    args += _read_only_args(spec, writable)
    args += ["--bind", str(spec.home), str(spec.home)]
    # last: no later bind of a root or a git folder lays the real files back over the covers
    args += _hide_args(_mount_order(spec.covered, writable))
    args += ["--chdir", str(spec.cwd), "--", *argv]
    return args


# -- macOS: sandbox-exec (Seatbelt) ------------------------------------------------------------


def _sb_string(path: Path | str) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _sb_paths(paths: Iterable[Path]) -> str:
    return " ".join(f"(subpath {_sb_string(os.path.realpath(p))})" for p in paths)


def seatbelt_profile(spec: SandboxSpec) -> str:
    """A Seatbelt profile equivalent to bwrap_argv's mounts (later rules win over earlier ones).

    Not exercised by the test suite (it runs on Linux only)."""
    writable = [*spec.roots, *spec.extra_writable, spec.home, Path(tempfile.gettempdir())]
    lines = ["(version 1)", "(allow default)", "(deny file-write*)",
             f"(allow file-write* {_sb_paths(writable)} (literal \"/dev/null\") (regex #\"^/dev/tty\")"
             " (regex #\"^/dev/fd/\"))"]
    hidden = _existing(spec.hidden)
    if hidden:
        lines.append(f"(deny file-read* file-write* {_sb_paths(hidden)})")
        inner = [r for r in spec.roots if _inside(r, hidden)]
        if inner:
            lines.append(f"(allow file-read* file-write* {_sb_paths(inner)})")
    if covered := _existing(spec.covered):  # after the roots' allow: secret stores in them stay unreadable
        lines.append(f"(deny file-read* file-write* {_sb_paths(covered)})")
    for path in [*spec.read_only, *spec.pinned]:  # a pinned folder itself: not renamed nor removed
        lines.append(f"(deny file-write* (literal {_sb_string(os.path.realpath(path))}))")
    if spec.read_only_folders:
        lines.append(f"(deny file-write* {_sb_paths(spec.read_only_folders)})")
    lines.append("(deny process-info* (target others))")
    if not spec.network:
        lines.append("(deny network*)")
    return "\n".join(lines) + "\n"


def sandbox_exec_argv(argv: Sequence[str], spec: SandboxSpec, tool: str = "/usr/bin/sandbox-exec") -> list[str]:
    return [tool, "-p", seatbelt_profile(spec), *argv]


# -- detection and wrapping --------------------------------------------------------------------


def wrap(argv: Sequence[str], spec: SandboxSpec, status: SandboxStatus | None = None) -> list[str]:
    """`argv` wrapped in the available sandbox; raises RuntimeError when there is none."""
    status = status or sandbox_status()
    if status.kind == "bwrap" and status.available:
        return bwrap_argv(argv, spec, status.executable or "bwrap")
    if status.kind == "sandbox-exec" and status.available:
        return sandbox_exec_argv(argv, spec)
    raise RuntimeError(f"No OS sandbox is available: {status.reason}")


def _probe(kind: str, make: object) -> SandboxStatus:
    """Run `true` once under the sandbox with a throw-away root: does it really work here?"""
    with tempfile.TemporaryDirectory(prefix="generalagent-probe-") as tmp:
        root = Path(os.path.realpath(tmp))
        (root / "home").mkdir()
        spec = SandboxSpec(roots=(root,), cwd=root, home=root / "home")
        argv = make(["/bin/sh", "-c", "echo ok > probe"], spec)  # type: ignore[operator]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT, stdin=subprocess.DEVNULL,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return SandboxStatus(False, kind, f"{kind} could not run a test command ({exc})")
        if done.returncode != 0 or not (root / "probe").is_file():
            why = done.stderr.decode("utf-8", "replace").strip()[:300] or f"exit code {done.returncode}"
            return SandboxStatus(False, kind, f"{kind} is installed but does not work here ({why})")
    return SandboxStatus(True, kind, f"{kind} works (roots writable, the rest read-only)")


@functools.lru_cache(maxsize=1)
def sandbox_status() -> SandboxStatus:
    """Whether shell commands can run sandboxed here (checked once per process)."""
    if sys.platform.startswith("linux"):
        found = shutil.which("bwrap")
        if found is None:
            return SandboxStatus(False, "none", f"bubblewrap (bwrap) is not installed; {INSTALL_HINT['linux']}")
        probed = _probe("bwrap", lambda argv, spec: bwrap_argv(argv, spec, found))
        return dataclasses.replace(probed, executable=found)
    if sys.platform == "darwin":
        if not Path("/usr/bin/sandbox-exec").exists():
            return SandboxStatus(False, "none", f"sandbox-exec is missing; {INSTALL_HINT['darwin']}")
        return _probe("sandbox-exec", sandbox_exec_argv)
    return SandboxStatus(False, "none", f"no OS sandbox is supported on {sys.platform}")


def describe(status: SandboxStatus) -> str:
    """One line for the start-up log and `doctor`."""
    if status.available:
        return f"shell commands run in an OS sandbox: {status.reason}"
    return (f"NO OS sandbox for shell commands: {status.reason}. Every run_bash_command call needs approval "
            "until a sandbox works.")
