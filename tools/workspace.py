"""Workspace roots, the one path resolver, and an iterative folder walker.

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
  own data dir (except its `workspaces/`); writes also to the policy and agents files;
- hard links: a regular file with more than one link may have names outside the roots,
  which cannot be found cheaply. Writes to such a file are refused (`for_write=True`).
  Reads are allowed: the file already has a name inside a root, our tools never create
  hard links, and writes through our tools replace files by rename, so nothing outside
  can change through them;
- `must_exist=True` raises `NotFound` when nothing is there.

The resolved path is what tools must use afterwards (never the model's string).
A component swapped for a symlink between resolution and use is a race this cannot
close; writers open the final component with O_NOFOLLOW and rename within one folder.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import cast

from mcp_server.errors import NotConfigured, NotFound, PathNotAllowed
from mcp_server.settings import Settings
from tools.runtime import Runtime

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


def workspace_roots(rt: Runtime, session_id: str | None = None) -> tuple[Path, ...]:
    """The allowed roots, realpath-resolved, in configured order (see `roots_for`)."""
    return roots_for(rt.settings, session_id)


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
        names = ", ".join(str(r) for r in configured)
        raise NotConfigured(
            f"None of the workspace roots exists ({names}). Create the folder(s) or fix "
            "GENERALAGENT_ROOTS / --root, then restart the server."
        )
    return tuple(roots)


def is_within(path: Path, roots: Collection[Path]) -> bool:
    """True when `path` (already resolved) is one of `roots` or below one (by components)."""
    return any(path == root or path.is_relative_to(root) for root in roots)


def _roots_text(roots: Collection[Path]) -> str:
    return ", ".join(str(r) for r in roots)


def _refuse(path: str, why: str, roots: Collection[Path]) -> PathNotAllowed:
    shown = path if len(path) <= 200 else path[:200] + "…"
    return PathNotAllowed(
        f"Path {shown!r} is not allowed: {why}. Use a path inside the workspace root(s) "
        f"{_roots_text(roots)} (relative paths start at {next(iter(roots))})."
    )


def _check_syntax(path: str, roots: Collection[Path]) -> None:
    if not path:
        raise _refuse(path, "it is empty", roots)
    if "\x00" in path:
        raise _refuse(path.replace("\x00", "\\0"), "it contains a NUL byte", roots)
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
    rt: Runtime,
    path: str,
    *,
    must_exist: bool = False,
    for_write: bool = False,
    session_id: str | None = None,
) -> Path:
    """Resolve a model-given path to a real path inside a workspace root (see the module doc)."""
    roots = workspace_roots(rt, session_id)
    _check_syntax(path, roots)
    joined = Path(path) if os.path.isabs(path) else roots[0] / path
    try:
        real = Path(os.path.realpath(joined, strict=False))
        info = os.stat(real)
    except FileNotFoundError:
        info = None
    except OSError as exc:  # ELOOP, ENAMETOOLONG, ENOTDIR, EACCES
        raise _refuse(path, f"it cannot be resolved ({exc.strerror or exc})", roots) from None
    if not is_within(real, roots):
        raise _refuse(path, f"it resolves to {real}, outside the workspace", roots)
    _check_not_server_data(rt, path, real, roots, for_write)
    if info is None:
        if os.path.lexists(real):  # a symlink whose target cannot be followed (a loop)
            raise _refuse(path, "it is a symlink loop or a broken link", roots)
        if must_exist:
            raise NotFound(
                f"No file or folder {path!r} in the workspace ({_roots_text(roots)}). "
                "Call list_workspace_files or find_files to see what exists."
            )
        return real
    if for_write and stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise _refuse(
            path, f"the file has {info.st_nlink} hard links and another one may be outside the workspace; "
            "write to a new file instead", roots,
        )
    return real


def server_data_dirs(rt: Runtime) -> tuple[Path, ...]:
    """Folders holding the server's own state (approvals, audit log, indexes): off limits to file
    tools even when a root contains them. The per-session workspaces under it are not included."""
    return (Path(os.path.realpath(rt.settings.data_dir)),)


def _check_not_server_data(rt: Runtime, path: str, real: Path, roots: Collection[Path], for_write: bool) -> None:
    data_dirs = server_data_dirs(rt)
    if is_within(real, data_dirs) and not real.is_relative_to(data_dirs[0] / "workspaces"):
        raise _refuse(path, "it is inside the server's own data folder", roots)
    protected = [p for p in (rt.settings.policy_file, rt.settings.agents_file) if p is not None]
    if for_write and any(real == Path(os.path.realpath(p)) for p in protected):
        raise _refuse(path, "it is the server's rules or agents file, which tools may not change", roots)


def display_path(path: Path, roots: Sequence[Path]) -> str:
    """How tools show a path so that it can be passed back as it is: relative to the first root
    ("." for the root itself), absolute elsewhere (relative paths always resolve against the first
    root, so a path in a second root shown relative would name a different file)."""
    first = roots[0]
    if path == first:
        return "."
    if path.is_relative_to(first):
        return path.relative_to(first).as_posix()
    return str(path)


# -- the iterative walker -------------------------------------------------------------------


@dataclass(frozen=True)
class WalkEntry:
    """One regular file met by the walker."""

    path: Path  # absolute, under the walk's root (symlinked files: the link's path)
    rel: str  # POSIX path relative to the walk's root
    size: int
    mtime: float
    depth: int  # 0 = directly in the root


class FileWalk:
    """Iterate the regular files under `root`, depth first, names sorted, without recursion.

    Never follows directory symlinks; symlinked files are yielded only when their target is
    a regular file inside `confine_to` (default: the root). Skips hidden entries (unless
    include_hidden), folders named in skip_dir_names, and folders in skip_paths. Stops
    descending below max_depth (counted in `depth_capped`) and stops after max_entries
    directory entries (then `truncated` is True). Unreadable folders are counted in `errors`.
    """

    def __init__(
        self,
        root: Path,
        *,
        max_depth: int = 64,
        max_entries: int = 200_000,
        include_hidden: bool = False,
        skip_dir_names: Collection[str] = INDEX_DIR_NAMES,
        skip_paths: Collection[Path] = (),
        confine_to: Collection[Path] | None = None,
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.max_depth = max_depth
        self.max_entries = max_entries
        self.include_hidden = include_hidden
        self.skip_dir_names = frozenset(skip_dir_names)
        self.skip_paths = frozenset(Path(os.path.realpath(p)) for p in skip_paths)
        self.confine_to = tuple(Path(os.path.realpath(p)) for p in confine_to) if confine_to else (self.root,)
        self.truncated = False
        self.depth_capped = 0
        self.errors = 0
        self.seen = 0

    def __iter__(self) -> Iterator[WalkEntry]:
        stack: list[tuple[Path, int]] = [(self.root, 0)]
        while stack:
            folder, depth = stack.pop()
            subdirs: list[Path] = []
            for entry in self._scan(folder):
                if self.seen >= self.max_entries:
                    self.truncated = True
                    return
                self.seen += 1
                if not self.include_hidden and entry.name.startswith("."):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(Path(entry.path))
                    continue
                found = self._file_entry(entry, depth)
                if found is not None:
                    yield found
            self._push(stack, subdirs, depth)

    def _scan(self, folder: Path) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(folder) as it:
                return sorted(it, key=lambda e: e.name)
        except OSError:
            self.errors += 1
            return []

    def _push(self, stack: list[tuple[Path, int]], subdirs: list[Path], depth: int) -> None:
        keep = [d for d in subdirs if d.name not in self.skip_dir_names and d not in self.skip_paths]
        if keep and depth + 1 > self.max_depth:
            self.depth_capped += len(keep)
            return
        stack.extend((d, depth + 1) for d in reversed(keep))

    def _file_entry(self, entry: os.DirEntry[str], depth: int) -> WalkEntry | None:
        try:
            if entry.is_symlink():
                real = Path(os.path.realpath(entry.path))
                if not is_within(real, self.confine_to):
                    return None
                info = os.stat(real)
            else:
                info = entry.stat(follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        path = Path(entry.path)
        rel = path.relative_to(self.root).as_posix()
        return WalkEntry(path=path, rel=rel, size=info.st_size, mtime=info.st_mtime, depth=depth)


walk_files = FileWalk  # an iterable over the files under a root; check `.truncated` afterwards


# -- glob patterns (no regex, no recursion: linear-time segment matching) -------------------

MAX_PATTERN_CHARS = 512
MAX_BRACE_EXPANSIONS = 64

_Token = tuple[str, object]  # ("lit", ch) | ("any", None) | ("star", None) | ("class", (negated, items))


def expand_braces(pattern: str) -> list[str]:
    """`a.{pdf,docx}` -> [`a.pdf`, `a.docx`]; nested braces work; at most 64 results."""
    done: list[str] = []
    todo = [pattern]
    while todo:
        current = todo.pop()
        span = _first_brace_group(current)
        if span is None:
            done.append(current)
        else:
            start, end, options = span
            todo.extend(current[:start] + opt + current[end + 1 :] for opt in reversed(options))
        if len(done) + len(todo) > MAX_BRACE_EXPANSIONS:
            raise ValueError(f"the pattern expands to more than {MAX_BRACE_EXPANSIONS} alternatives")
    return list(dict.fromkeys(done))


def _first_brace_group(text: str) -> tuple[int, int, list[str]] | None:
    """The first `{...}` holding a top-level comma: (start, end, options)."""
    for start, ch in enumerate(text):
        if ch != "{":
            continue
        depth, commas = 0, [start]
        for index in range(start, len(text)):
            if text[index] == "{":
                depth += 1
            elif text[index] == "}":
                depth -= 1
                if depth == 0:
                    if len(commas) == 1:
                        break  # `{x}` without a comma stays literal
                    bounds = [*commas, index]
                    return start, index, [text[a + 1 : b] for a, b in zip(bounds, bounds[1:], strict=False)]
            elif text[index] == "," and depth == 1:
                commas.append(index)
    return None


def _tokenize(segment: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            if not tokens or tokens[-1][0] != "star":
                tokens.append(("star", None))
        elif ch == "?":
            tokens.append(("any", None))
        elif ch == "[" and (close := _class_end(segment, i)) > 0:
            tokens.append(("class", _parse_class(segment[i + 1 : close])))
            i = close
        else:
            tokens.append(("lit", ch))
        i += 1
    return tokens


def _class_end(segment: str, start: int) -> int:
    i = start + 1
    if i < len(segment) and segment[i] in "!^":
        i += 1
    if i < len(segment) and segment[i] == "]":
        i += 1
    close = segment.find("]", i)
    return close


def _parse_class(body: str) -> tuple[bool, list[tuple[str, str]]]:
    negated = body[:1] in ("!", "^")
    body = body[1:] if negated else body
    items: list[tuple[str, str]] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            items.append((body[i], body[i + 2]))
            i += 3
        else:
            items.append((body[i], body[i]))
            i += 1
    return negated, items


def _token_matches(token: _Token, ch: str) -> bool:
    kind, value = token
    if kind == "any":
        return True
    if kind == "lit":
        return value == ch
    negated, items = cast(tuple[bool, list[tuple[str, str]]], value)
    inside = any(lo <= ch <= hi for lo, hi in items)
    return inside != negated


def _segment_matches(tokens: list[_Token], name: str) -> bool:
    """Wildcard match of one path segment: two pointers, back-tracking only to the last star."""
    t = n = 0
    star_t, star_n = -1, 0
    while n < len(name):
        if t < len(tokens) and tokens[t][0] == "star":
            star_t, star_n = t, n
            t += 1
        elif t < len(tokens) and _token_matches(tokens[t], name[n]):
            t += 1
            n += 1
        elif star_t >= 0:
            t, star_n = star_t + 1, star_n + 1
            n = star_n
        else:
            return False
    return all(tok[0] == "star" for tok in tokens[t:])


class GlobPattern:
    """A compiled glob: `*`, `?`, `[abc]`, `[!a-z]`, `**` (any number of folders), `{a,b}`.

    Case-insensitive. A pattern without `/` matches file names at any depth (`*.pdf` is
    `**/*.pdf`). Matching is linear in practice (no regex, so no catastrophic patterns).
    """

    def __init__(self, pattern: str) -> None:
        if not pattern or len(pattern) > MAX_PATTERN_CHARS or "\x00" in pattern:
            raise ValueError(f"the pattern must be 1-{MAX_PATTERN_CHARS} characters without NUL bytes")
        self.pattern = pattern
        self.alternatives = [self._compile(alt) for alt in expand_braces(pattern.casefold())]

    @staticmethod
    def _compile(pattern: str) -> list[list[_Token] | None]:
        pattern = pattern.strip("/")
        if pattern.startswith("./"):
            pattern = pattern[2:]
        parts = [p for p in pattern.split("/") if p not in ("", ".")]
        if len(parts) == 1 and parts[0] != "**":
            parts = ["**", *parts]
        return [None if part == "**" else _tokenize(part) for part in parts]

    def matches(self, rel_path: str) -> bool:
        names = rel_path.casefold().split("/")
        return any(_path_matches(alt, names) for alt in self.alternatives)


def _path_matches(parts: list[list[_Token] | None], names: list[str]) -> bool:
    """Segment-level match where None (`**`) spans zero or more names. Iterative DP, O(P*N)."""
    reachable = [False] * (len(names) + 1)
    reachable[0] = True
    for part in parts:
        nxt = [False] * (len(names) + 1)
        for i, ok in enumerate(reachable):
            if not ok:
                continue
            if part is None:
                for j in range(i, len(names) + 1):
                    nxt[j] = True
                break
            if i < len(names) and _segment_matches(part, names[i]):
                nxt[i + 1] = True
        reachable = nxt
    return reachable[len(names)]


def remove_tree(path: Path) -> None:
    """Delete a folder tree without recursion (shutil.rmtree fails at ~1,000 nested folders).

    Works relative to open folder handles, so each step costs the same at any depth. Symlinks
    are removed, never followed. Missing paths are ignored.
    """
    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
        return
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    names: list[str] = []  # path from `path` down to the current folder
    fd = os.open(path, flags)
    try:
        while True:
            child = _first_subdir_after_unlinking_files(fd)
            if child is not None:
                new_fd = os.open(child, flags, dir_fd=fd)
                os.close(fd)
                fd = new_fd
                names.append(child)
                continue
            if not names:
                break
            parent = os.open("..", flags, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(path)


def _first_subdir_after_unlinking_files(fd: int) -> str | None:
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                return entry.name
            os.unlink(entry.name, dir_fd=fd)
    return None
