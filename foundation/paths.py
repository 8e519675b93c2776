"""Workspace roots and the one path resolver.

Every tool that takes a path from a model resolves it here. The contract of
`resolve_path`:

- relative paths are joined to the first root; absolute paths are taken as they are;
- the result is `os.path.realpath` of that (every symlink followed, `..` applied after
  symlinks, as the kernel does) and must be a root or lie under one, compared by path
  components (so `/root_evil` is not inside `/root`);
- refused with `PathNotAllowed` (the message names the roots and the fix): empty paths,
  NUL bytes, paths starting with `-` (could be taken as a flag) or `~/`, paths longer than
  4,096 characters or with a component longer than 255 bytes, symlink loops, and any
  path (dangling symlinks included) whose target lies outside every root, and the server's
  own data dir (except its `workspaces/`); writes also to the policy, agents and skills files
  and inside skill folders;
- hard links: a regular file with more than one link may have names outside the roots,
  which cannot be found cheaply. Writes to such a file are refused (`for_write=True`).
  Reads are allowed: the file already has a name inside a root, our tools never create
  hard links, and writes through our tools replace files by rename, so nothing outside
  can change through them;
- `must_exist=True` raises `NotFound` when nothing is there.

The resolved path is what tools must use afterwards (never the model's string), and
they open it with `open_for_read` / `open_folder` (foundation/safe_open.py): walked from a
handle of the root with O_NOFOLLOW on every component and checked on the opened
descriptor, so a component swapped for a symlink after resolution is refused, never
followed. That check also refuses a descriptor that really is a secret store (the approval
policy's `secrets.deny` patterns, handed down as `SecretPaths`): what the gate checked may
have been swapped for one since. Messages never show where a symlink outside the roots points.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Collection, Sequence
from hashlib import sha256
from pathlib import Path

from foundation.calls import SecretPaths
from foundation.errors import NotConfigured, NotFound, PathNotAllowed
from foundation.safe_open import Allowed, denied, open_dir, open_file
from foundation.settings import Settings

MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255
WORKSPACE_SUBDIRS = ("uploads", "outputs", "temp")
INDEX_DIR_NAMES = frozenset({".generalagent", ".generalagent-index", "__generalagent__"})
"""Folder names that belong to this server (skipped by walkers and listings; hidden ones are
skipped anyway, these are listed so the rule holds even with include_hidden=True)."""

_SESSION_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")


def session_dir_name(session_id: str | None) -> str:
    """A safe folder name for a session (the id itself when harmless, else a short hash)."""
    if not session_id:
        return "default"
    if _SESSION_RE.fullmatch(session_id):
        return session_id
    return "s-" + sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def default_workspace(data_dir: Path, session_id: str | None = None) -> Path:
    """`<data_dir>/workspaces/<session>/` with uploads/, outputs/ and temp/ created."""
    base = Path(os.path.realpath(data_dir)) / "workspaces" / session_dir_name(session_id)
    for sub in WORKSPACE_SUBDIRS:
        (base / sub).mkdir(parents=True, exist_ok=True)
    return base


def roots_for(settings: Settings, session_id: str | None = None) -> tuple[Path, ...]:
    """The allowed roots from plain settings (for code without a Runtime, e.g. the approval gate).

    Configured roots that do not exist (an unplugged drive) are skipped; when none of them
    exists NotConfigured is raised. With no roots configured: the per-session workspace.
    """
    configured = settings.roots
    if not configured:
        return (default_workspace(settings.data_dir, session_id),)
    roots: list[Path] = []
    for root in configured:
        real = Path(os.path.realpath(root))
        if real.is_dir() and real not in roots:
            roots.append(real)
    if not roots:
        files = [str(r) for r in configured if os.path.isfile(r)]
        if files:
            raise NotConfigured(
                f"The workspace root {', '.join(files)} is a file, not a folder. Give a folder in "
                "GENERALAGENT_ROOTS / --root (a running server reads them when it starts)."
            )
        names = ", ".join(str(r) for r in configured)
        raise NotConfigured(
            f"None of the workspace roots exists ({names}). Create the folder(s) or fix "
            "GENERALAGENT_ROOTS / --root (a running server reads them when it starts)."
        )
    return tuple(roots)


def _plain(text: str) -> bool:
    """An absolute POSIX path written the way pathlib writes it (no empty, "." or ".." parts)."""
    return (os.sep == "/" and text.startswith("/") and not text.startswith("//") and "//" not in text
            and "/./" not in text and "/../" not in text and (text == "/" or not text.endswith(("/", "/.", "/.."))))


def is_within(path: Path, roots: Collection[Path]) -> bool:
    """True when `path` (already resolved) is one of `roots` or below one (by components)."""
    return any(path == root or path.is_relative_to(root) for root in roots)


def _roots_text(roots: Collection[Path]) -> str:
    return ", ".join(str(r) for r in roots)


def _refuse(path: str, why: str, roots: Collection[Path]) -> PathNotAllowed:
    shown = path if len(path) <= 200 else path[:200] + "…"
    relative = "" if os.path.isabs(path) else f" (relative paths start at {next(iter(roots))})"
    return PathNotAllowed(
        f"Path {shown!r} is not allowed: {why}. Use a path inside the workspace root(s) {_roots_text(roots)}{relative}."
    )


def _why_outside(path: str, joined: Path, roots: Collection[Path]) -> str:
    """The true cause of a resolved path outside the roots: '..' that climbs out, a symlink that leads
    out, or simply a path elsewhere (never where a symlink points)."""
    if is_within(Path(os.path.normpath(joined)), roots):
        return "a symlink in it leads outside the workspace roots"
    parts = joined.parts
    if ".." in parts and is_within(Path(os.path.normpath(Path(*parts[: parts.index("..")]))), roots):
        return "its '..' leads outside the workspace roots"
    return "it is outside the workspace roots"


def is_decodable(name: str) -> bool:
    """True when `name` came from valid UTF-8 bytes (no lone surrogates from surrogateescape)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_syntax(path: str, roots: Collection[Path]) -> None:
    if not path:
        raise _refuse(path, "it is empty", roots)
    if "\x00" in path:
        raise _refuse(path.replace("\x00", "\\0"), "it contains a NUL byte", roots)
    if not is_decodable(path):  # lone surrogates: bytes that are not UTF-8 (a name tools never show)
        shown = path.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        raise _refuse(shown, "it is not valid UTF-8 text; rename the file or folder to a UTF-8 name", roots)
    if path == "~" or path.startswith("~/"):
        raise _refuse(path, "'~' is not expanded (the workspace is not your home folder)", roots)
    if path.startswith("-"):
        raise _refuse(path, "it starts with '-' and could be taken as an option; write ./" + path, roots)
    if len(path) > MAX_PATH_CHARS:
        raise _refuse(path, f"it is longer than {MAX_PATH_CHARS} characters", roots)
    for part in path.split("/"):
        if len(os.fsencode(part)) > MAX_NAME_BYTES:
            raise _refuse(path, f"a name in it is longer than {MAX_NAME_BYTES} bytes", roots)


def resolve_path(
    settings: Settings,
    path: str,
    *,
    must_exist: bool = False,
    for_write: bool = False,
    session_id: str | None = None,
) -> Path:
    """Resolve a model-given path to a real path inside a workspace root (see the module doc)."""
    roots = roots_for(settings, session_id)
    _check_syntax(path, roots)
    joined = Path(path) if os.path.isabs(path) else roots[0] / path
    try:
        real = Path(os.path.realpath(joined, strict=False))
        info = os.stat(real)
    except FileNotFoundError:
        info = None
    except PermissionError:
        raise denied(path[:200], "A folder on the way to") from None
    except OSError as exc:  # ELOOP, ENAMETOOLONG, ENOTDIR
        raise _refuse(path, f"it cannot be resolved ({exc.strerror or exc})", roots) from None
    if not is_within(real, roots):
        raise _refuse(path, _why_outside(path, joined, roots), roots)
    _check_not_server_data(settings, path, real, roots, for_write)
    if info is None:
        if os.path.lexists(real):  # a symlink whose target cannot be followed (a loop)
            raise _refuse(path, "it is a symlink loop or a broken link", roots)
        if must_exist:
            raise NotFound(
                f"No file or folder {path!r} in the workspace ({_roots_text(roots)}). "
                "Call list_workspace_files to see what exists (enable_tools([\"list_workspace_files\"]) first "
                "if it is not listed)."
            )
        return real
    if for_write and stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise _refuse(
            path, f"the file has {info.st_nlink} hard links and another one may be outside the workspace; "
            "write to a new file instead", roots,
        )
    return real


def server_data_dirs(settings: Settings) -> tuple[Path, ...]:
    """Folders holding the server's own state (approvals, audit log, indexes): off limits to file
    tools even when a root contains them. The per-session workspaces under it are not included."""
    return (Path(os.path.realpath(settings.data_dir)),)


def _check_not_server_data(settings: Settings, path: str, real: Path, roots: Collection[Path], for_write: bool) -> None:
    data_dirs = server_data_dirs(settings)
    if is_within(real, data_dirs) and not real.is_relative_to(data_dirs[0] / "workspaces"):
        raise _refuse(path, "it is inside the server's own data folder", roots)
    protected = [p for p in (settings.policy_file, settings.agents_file, settings.skills_file) if p is not None]
    if for_write and any(real == Path(os.path.realpath(p)) for p in protected):
        raise _refuse(path, "it is the server's rules or agents file, which tools may not change", roots)
    # skills: skill folders are read-only to every tool
    if for_write and is_within(real, [Path(os.path.realpath(d)) for d in settings.skills_dirs]):
        raise _refuse(path, "it is inside a skill folder (GENERALAGENT_SKILLS_DIRS), which tools may not change", roots)


def fd_allowed(settings: Settings, roots: Collection[Path], secrets: SecretPaths | None) -> Allowed:
    """The rule for where an opened descriptor may really be: inside a root, not in the server's data
    folder (except its workspaces/), and not a secret store by `secrets` (the policy's deny patterns;
    refused with its own message: no tool reads one, whatever the path given was when it was checked)."""
    data_dirs = server_data_dirs(settings)
    workspaces = data_dirs[0] / "workspaces"
    kept = tuple(roots)

    def allowed(real: Path) -> bool:
        if not (is_within(real, roots) and (not is_within(real, data_dirs) or real.is_relative_to(workspaces))):
            return False
        if secrets is not None and secrets.store(str(real), kept):
            raise PathNotAllowed(f"{display_path(real, kept)!r} is a secret store (keys, credentials, .env), which "
                                 "file tools do not open. Ask the user for the value you need.")
        return True

    return allowed


def open_for_read(settings: Settings, real: Path, session_id: str | None = None, shown: str = "", *,
                  secrets: SecretPaths | None) -> int:
    """A read-only descriptor of a resolved regular file, opened race-free (see the module doc)."""
    roots = roots_for(settings, session_id)
    return open_file(real, roots, fd_allowed(settings, roots, secrets), shown=shown or real.name)


def open_folder(
    settings: Settings, real: Path, session_id: str | None = None, *, create: bool = False, shown: str = "",
    secrets: SecretPaths | None,
) -> int:
    """A handle of a resolved folder (created with its parents when `create`), opened race-free."""
    roots = roots_for(settings, session_id)
    return open_dir(real, roots, fd_allowed(settings, roots, secrets), create=create, shown=shown or real.name)


def display_path(path: Path | str, roots: Sequence[Path]) -> str:
    """How tools show a path so that it can be passed back as it is: relative to the first root
    ("." for the root itself), absolute elsewhere (relative paths always resolve against the first
    root, so a path in a second root shown relative would name a different file)."""
    if isinstance(path, str):
        text, first_text = path, str(roots[0])
        if _plain(text) and _plain(first_text):  # as pathlib would compare them, without its cost per hit
            prefix = first_text if first_text.endswith("/") else first_text + "/"
            if text == first_text:
                return "."
            return text[len(prefix):] if text.startswith(prefix) else text
        path = Path(path)
    first = roots[0]
    if path == first:
        return "."
    if path.is_relative_to(first):
        return path.relative_to(first).as_posix()
    return str(path)
