"""The OS sandbox under every shell command: bubblewrap on Linux, sandbox-exec (Seatbelt) on macOS.

The approval policy decides whether a command may run; the sandbox limits what a command that
runs can do, so that a hole in the command parser is harmless:

- the file-system view is an allow-list: an empty root with the system folders (SYSTEM_FOLDERS: /usr, /bin,
  /sbin, /lib*, /etc minus its credential files, /opt; read-only), a minimal /dev, its own /proc, a private
  /tmp and /run (tmpfs), a private empty HOME, and the workspace roots. Nothing else of the host: not the
  user's home, other disks, /var, nor the server's data folder; a symlink in a root that leads elsewhere leads
  nowhere;
- the roots are read-only unless a person let the command run (`SandboxSpec.roots_writable`: an approval, or
  the user's own allow rule; the gate's `Consent`): a command the shipped policy allows on its own writes
  nothing, whatever its option parser does (an allow-list miss is harmless);
- in a root that is writable: the server's data folder and the secret stores in the user's home (when a root
  holds them: ~/.ssh, ~/.aws, ~/.vault-token, ...: what the policy's secret patterns name there, tools/bash.py
  `scan_home`) are not visible; the rules, agents and skills files and the skill folders stay read-only (a
  missing one too: an empty read-only placeholder holds its place while the command runs, removed after it),
  and every folder on the way from the root to one of these guarded paths is bound onto itself
  (`pinned_chain`): no parent can be renamed to put a planted folder in the guarded one's place;
- every file git reads as configuration or runs as a hook for a root's repository and for those nested in
  the roots (`root/proj/.git`, submodules; tools/workspace_scan.py finds them) stays read-only, missing ones
  too (`git_guards`: config, config.worktree, commondir, hooks/, the core.hooksPath folder, included config
  files; in the git folder, its common folder, its worktrees' and submodules' git folders), and their `.git`
  cannot be renamed or replaced (git commands still work: objects, refs and the index are written as
  usual), so a command cannot plant git config or hooks that a later git run outside the sandbox would
  execute. A root without a `.git` gets an empty read-only one (`git init` there fails); a repository the
  command makes in a sub-folder is its own (git run in it later runs what it planted, like its scripts);
- the secret stores inside the roots (`tools/workspace_scan.py`: the policy's deny patterns, `.env`, keys) cannot be
  read: each is covered by an empty device (a folder: an empty folder), like the ones under HOME;
- a fresh /proc in a new pid namespace: other processes (and their environ) are not visible;
- a private, empty HOME and /tmp; no network unless the user enables it (`bash_network`), and then outbound
  only: its own network namespace still, connected by slirp4netns, the host's loopback and own addresses out
  of reach (tools/sandbox_net.py); on macOS the profile denies connections to localhost;
- no vsock socket, and no netlink socket with the network off (tools/seccomp.py);
- no Unix-domain socket that could connect outside the sandbox (tools/seccomp.py: `socket(AF_UNIX)` fails,
  connected `socketpair()` works), network on or off: a host service's socket file (lxd, docker, a
  database) is reachable wherever it lies, read-only or not;
- the command dies with the server (--die-with-parent) and cannot reach the terminal (--new-session).

`sandbox_status()` says whether a sandbox works here (found on PATH AND a trivial command ran
in it: bubblewrap can fail inside some containers); it is checked once and cached.
`wrap(argv, spec)` returns the argv that runs `argv` inside it; `launch(argv)` gives the command line
to start and the file descriptors it reads (the seccomp filter, a long option list, the network's setup).
macOS (Seatbelt, untested here): the roots are read-only likewise, but reads are not an allow-list there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import glob
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tools import sandbox_net, seccomp
from tools.sandbox_git import ProgramKey
from tools.sandbox_net import Outbound

SYSTEM_SECRETS = (Path("/var/run/docker.sock"), Path("/var/run/containerd"), Path("/var/run/secrets"))
"""Outside /run (hidden as a whole): container-runtime sockets and mounted service-account secrets (only
reachable when a root holds them: /var is not in the sandbox)."""
SYSTEM_FOLDERS = tuple(Path(p) for p in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
                                         "/opt"))
"""The host's folders a command sees (read-only; a linked one, as on merged-/usr systems, as the same link):
programs, libraries and their configuration. Nothing else of the host is visible but the roots: not the user's
home, not other disks, not /var, not the server's data folder (an allow-list, so a path nobody thought of is
not in it)."""
ETC_SECRETS = ("shadow", "shadow-", "gshadow", "gshadow-", "security/opasswd", "ssh/ssh_host_*_key",
               "ssl/private", "krb5.keytab", "NetworkManager/system-connections", "wireguard", "ppp/chap-secrets",
               "ppp/pap-secrets", "libvirt/secrets", "sudoers", "sudoers.d", "docker/key.json")
"""Credential files in /etc (globs relative to it), covered in the sandbox (readable only by root anyway)."""
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
ARGV_INLINE_BYTES = 64 * 1024
"""Longer bubblewrap command lines (thousands of covered secret stores) go through a file descriptor."""


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
    commondirs: tuple[Path, ...] = ()  # missing git `commondir` files: held by a read-only one saying "."
    roots_writable: bool = False  # False: every root (and its sub-folders) read-only, whatever the command does
    stubs: Path | None = None  # a server-private folder holding the placeholders' sources (`make_stubs`)
    git_programs: tuple[ProgramKey, ...] = ()  # config keys naming programs in the roots' repositories
    overlays: tuple[tuple[Path, Path], ...] = ()  # (file, where): read-only in its place (sanitised git config)
    readable: tuple[Path, ...] = ()  # folders outside the roots the user lets commands read (bash_read_paths)


# -- Linux: bubblewrap -------------------------------------------------------------------------


def _existing(paths: Iterable[Path]) -> list[Path]:
    return [p for p in paths if os.path.lexists(p)]


def _inside(path: Path, folders: Iterable[Path]) -> bool:
    return any(path != f and path.is_relative_to(f) for f in folders)


def _visible(path: Path, shown: Iterable[Path]) -> bool:
    """In the sandbox only the roots (`shown`) and the system folders are; under the private /tmp and /run
    only what a root brings back."""
    shown = list(shown)
    if any(path.is_relative_to(r) for r in shown):
        return True
    return not any(path.is_relative_to(p) for p in PRIVATE_MOUNTS) and \
        any(path.is_relative_to(f) for f in SYSTEM_FOLDERS)


def _mount_order(paths: Iterable[Path], shown: Iterable[Path]) -> list[Path]:
    """The existing `paths` resolved (a linked ~/.ssh: its target), those the command can see, parents first."""
    real = {Path(os.path.realpath(p)) for p in _existing(paths)}
    shown = list(shown)
    return sorted((p for p in real if _visible(p, shown)), key=lambda p: len(p.parts))


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
    writable = _writable(spec)
    out: dict[Path, bool] = {}
    for path, folder in [*((p, False) for p in (*spec.read_only, *spec.commondirs)),
                         *((p, True) for p in spec.read_only_folders)]:
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


def _writable(spec: SandboxSpec) -> list[Path]:
    """The folders a command may write in (parents first): the roots only when a person let it."""
    paths = {*spec.extra_writable, *(spec.roots if spec.roots_writable else ())}
    return sorted(paths, key=lambda p: len(p.parts))


def pinned_chain(spec: SandboxSpec, writable: list[Path]) -> list[Path]:
    """Every folder on the way from a writable root to a guarded path (a pinned git folder, a read-only file or
    folder, a placeholder, a hidden folder): bound onto itself, so that no command can rename a parent and put
    a folder of its own in the guarded one's place. Parents first."""
    guarded = [*spec.pinned, *spec.read_only, *spec.read_only_folders, *spec.commondirs, *spec.hidden,
               *(top for top, _ in placeholders(spec))]
    chain: dict[Path, None] = {}
    for path in guarded:
        top = next((w for w in writable if path != w and path.is_relative_to(w)), None)
        if top is None:
            continue
        for folder in reversed(path.parents):
            if folder != top and folder.is_relative_to(top) and folder.is_dir() and not folder.is_symlink():
                chain[folder] = None
    return sorted(chain, key=lambda p: len(p.parts))


def _read_only_args(spec: SandboxSpec, writable: list[Path]) -> list[str]:
    """The folders on the way to a guarded path and pinned folders bound onto themselves (a mount point cannot
    be renamed or removed), then the read-only files and folders; missing ones get an empty read-only
    placeholder."""
    args: list[str] = []
    pinned = [p for p in spec.pinned if p.is_dir() and _writable_place(p, writable)]
    for path in sorted({*pinned_chain(spec, writable), *pinned}, key=lambda p: len(p.parts)):  # parents first
        args += ["--bind", str(path), str(path)]
    for path in [*spec.read_only, *spec.read_only_folders]:
        if os.path.lexists(path) and _writable_place(path, writable):
            args += ["--ro-bind", str(path), str(path)]
    commondirs = set(spec.commondirs)
    for path, folder in placeholders(spec):
        if folder:
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
        elif spec.stubs is None:
            args += ["--ro-bind", "/dev/null", str(path)]  # (no stub folder: an unreadable stand-in)
        else:
            args += ["--ro-bind", str(spec.stubs / ("commondir" if path in commondirs else "empty")), str(path)]
    return args


STUB_FILES = {"empty": "", "commondir": ".\n", "resolv.conf": f"nameserver {sandbox_net.SLIRP_DNS}\n"}
"""The placeholders' sources: an empty file (readable: `grep -r` reads the stand-in of a missing
`config.worktree` like an empty file) and git's `commondir` saying "." (the git folder itself)."""


def make_stubs(folder: Path) -> Path | None:
    """The stub files in `folder` (a folder of the server's own, out of every command's sight: in its data
    folder, so that nothing is left behind in the temp folder), made once; None when they cannot be made (a
    read-only data folder: missing paths are then held by unreadable stand-ins)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in STUB_FILES.items():
            path = folder / name
            if not path.is_file() or path.read_text() != text:  # made whole, then put in place (atomically)
                work = folder / f".{name}-{os.getpid()}-{threading.get_ident()}"
                work.write_text(text)
                work.chmod(0o444)
                os.replace(work, path)
    except OSError:
        return None
    return folder


def _system_args() -> list[str]:
    """The system folders, read-only (a linked one as the same link), and /etc's credential files covered."""
    args: list[str] = []
    for folder in SYSTEM_FOLDERS:
        if folder.is_symlink():
            args += ["--symlink", os.readlink(folder), str(folder)]
        elif folder.is_dir():
            args += ["--ro-bind", str(folder), str(folder)]
    secrets = [Path(p) for pattern in ETC_SECRETS for p in glob.glob(f"/etc/{pattern}")]
    return args + _hide_args(p for p in secrets if not p.is_symlink())


def _resolv_conf_args(stubs: Path | None) -> list[str]:
    """With the network on, the command's only name server is slirp4netns's (the host's may be a loopback
    address, out of reach): a resolv.conf saying so, where /etc/resolv.conf leads (often into /run)."""
    target = Path(os.path.realpath("/etc/resolv.conf"))
    stub = stubs / "resolv.conf" if stubs is not None else None
    if stub is not None and stub.is_file():
        return ["--ro-bind", str(stub), str(target)]
    if target.is_relative_to("/run") and target.is_file():
        return ["--ro-bind", str(target), str(target)]
    return []


def bwrap_argv(argv: Sequence[str], spec: SandboxSpec, bwrap: str = "bwrap") -> list[str]:
    """The bubblewrap command line that runs `argv` under `spec` (later mounts cover earlier ones): an empty
    root file system with the system folders (read-only), a minimal /dev, its own /proc, a private /tmp and
    /run, and the roots (read-only unless `spec.roots_writable`)."""
    writable = _writable(spec)
    shown = sorted({*spec.roots, *spec.extra_writable}, key=lambda p: len(p.parts))
    readable = sorted({Path(os.path.realpath(p)) for p in spec.readable if os.path.isdir(p)},
                      key=lambda p: len(p.parts))
    hidden = _mount_order(spec.hidden, [*shown, *readable])
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    args += [*_system_args(), "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    if Path("/run").is_dir():
        args += ["--tmpfs", "/run"]
    if spec.network:  # (its own network namespace still: `launch` connects it outbound-only)
        args += _resolv_conf_args(spec.stubs)
    for path in readable:  # read-only, before the roots (a root inside one stays writable)
        args += ["--ro-bind", str(path), str(path)]
    for path in shown:
        args += ["--bind" if path in writable else "--ro-bind", str(path), str(path)]
    args += _hide_args(hidden)
    for path in shown:  # a root inside a hidden folder (the default workspace in the data dir)
        if _inside(path, hidden):
            args += ["--bind" if path in writable else "--ro-bind", str(path), str(path)]
    args += _read_only_args(spec, writable)
    for source, target in spec.overlays:
        if any(target.is_relative_to(r) for r in shown):
            args += ["--ro-bind", str(source), str(target)]
    args += ["--bind", str(spec.home), str(spec.home)]
    # last: no later bind of a root or a git folder lays the real files back over the covers
    args += _hide_args(_mount_order(spec.covered, shown))
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
    roots = spec.roots if spec.roots_writable else ()
    writable = [*roots, *spec.extra_writable, spec.home, Path(tempfile.gettempdir())]
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
    for path in [*spec.read_only, *spec.commondirs, *spec.pinned]:  # a pinned folder: not renamed nor removed
        lines.append(f"(deny file-write* (literal {_sb_string(os.path.realpath(path))}))")
    if spec.read_only_folders:
        lines.append(f"(deny file-write* {_sb_paths(spec.read_only_folders)})")
    lines.append("(deny process-info* (target others))")
    if not spec.network:
        lines.append("(deny network*)")
    else:  # the server's approval page (and any local service) stays out of reach: no peer lookup on macOS
        lines.append('(deny network-outbound (remote ip "localhost:*"))')
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


@contextlib.contextmanager
def launch(argv: list[str], network: bool = False) -> Iterator[tuple[list[str], tuple[int, ...], Outbound | None]]:
    """The command line to start for `argv`, the descriptors to pass to it and, with the network on, its
    outbound-only connection (`Outbound.start()` once the command started, `close()` after it ended): a
    bubblewrap one gets the seccomp filter (`--seccomp FD`), and its options go in a descriptor when they are
    too long for exec (`--args FD`); any other command line as it is. Raises NetworkSetupError when the network
    is on and cannot be set up outbound-only (sandbox_net.available)."""
    if not argv[0].endswith("bwrap"):
        yield argv, (), None
        return
    if network and (missing := sandbox_net.available()) is not None:
        raise sandbox_net.NetworkSetupError(f"Shell commands cannot have the network here: {missing}")
    fds: list[int] = []
    outbound = sandbox_net.Outbound() if network else None
    try:
        front: list[str] = []
        if seccomp.available():
            fds.append(_memfd("bwrap-seccomp", seccomp.unix_socket_filter(network)))
            front = ["--seccomp", str(fds[-1])]
        if outbound is not None:
            front += outbound.args()
        if sum(len(a) + 1 for a in argv) >= ARGV_INLINE_BYTES:
            options = argv.index("--")  # its options go in the file; the command stays on the command line
            fds.append(_memfd("bwrap-args", b"".join(a.encode("utf-8", "surrogateescape") + b"\0"
                                                     for a in argv[1:options])))
            argv = [argv[0], "--args", str(fds[-1]), *argv[options:]]
        yield [argv[0], *front, *argv[1:]], (*fds, *(outbound.fds() if outbound else ())), outbound
    except BaseException:
        if outbound is not None:
            outbound.close()
        raise
    finally:
        for fd in fds:
            os.close(fd)


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


def _probe(kind: str, make: object) -> SandboxStatus:
    """Run `true` once under the sandbox with a throw-away root: does it really work here?"""
    with tempfile.TemporaryDirectory(prefix="generalagent-probe-") as tmp:
        root = Path(os.path.realpath(tmp))
        (root / "home").mkdir()
        spec = SandboxSpec(roots=(root,), cwd=root, home=root / "home", roots_writable=True)
        argv = make(["/bin/sh", "-c", "echo ok > probe"], spec)  # type: ignore[operator]
        try:
            with launch(argv) as (started, fds, _):
                done = subprocess.run(started, capture_output=True, timeout=_PROBE_TIMEOUT, stdin=subprocess.DEVNULL,
                                      check=False, pass_fds=fds)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return SandboxStatus(False, kind, f"{kind} could not run a test command ({exc})")
        if done.returncode != 0 or not (root / "probe").is_file():
            why = done.stderr.decode("utf-8", "replace").strip()[:300] or f"exit code {done.returncode}"
            return SandboxStatus(False, kind, f"{kind} is installed but does not work here ({why})")
    sockets = "no Unix sockets" if kind != "bwrap" or seccomp.available() else \
        f"Unix sockets NOT blocked: no seccomp filter for {platform.machine()}"
    network = "" if kind != "bwrap" or (missing := sandbox_net.available()) is None else \
        f"; bash_network cannot be used: {missing}"
    return SandboxStatus(True, kind, f"{kind} works (the system folders and the roots only; roots read-only unless "
                                     f"approved; {sockets}){network}")


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
