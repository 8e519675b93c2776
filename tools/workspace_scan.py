"""What the shell sandbox needs to know of the workspace roots: the secret stores inside them, which no
command may read, and the git repositories nested in them, whose config and hooks stay read-only.

A command the approval policy allows may still read files nobody named: `grep -r KEY .`, `cat *`. The
policy denies reading secret stores (`.env`, `id_rsa`, `.ssh/`, ...: its `secrets.deny` patterns) to every
tool, so the sandbox makes that true for shell commands by construction: each secret store found in the
roots is covered (an empty device; a folder: an empty folder) while a command runs. Files the policy only
asks for (`credentials.json`, `*.pem`: also ordinary project files such as a CA bundle) stay readable.
A repository is a folder holding a `.git` folder or file (a worktree, a submodule): git run later outside
the sandbox would execute what a command planted in its config or hooks (tools/sandbox.py `git_guards`).

Found by a walk of the roots that lists again only the folders whose change time (ctime) moved since the
last walk (adding, removing or renaming an entry sets its folder's ctime, and no program can set it back),
so a command in a large workspace costs one `stat` per folder once the first walk is done. Linked folders
inside the roots are walked too, once each; a link out of the roots leads where the sandbox's allow-listed
view says (nothing of the user's files), and the gate judges the paths a command names through their links;
`.git` folders are not walked (git's own files). A workspace the walk cannot cover (over MAX_ENTRIES entries, a
folder it cannot list for another reason than permissions) is reported, and shell commands do not run.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from foundation.paths import display_path, is_within

MAX_ENTRIES = 1_000_000
"""Entries listed in one walk at most; a larger workspace cannot be checked, and shell commands are refused."""
SETTLED_NS = 2_000_000_000
"""A listing is kept only when it was taken this long after its folder's last change (coarse timestamps)."""
_SKIPPED_ERRORS = {errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR}  # a command cannot list it either


@dataclass(frozen=True)
class _Listing:
    ctime_ns: int
    listed_ns: int
    secrets: tuple[str, ...]  # secret entries of the folder (a symlink: its target)
    repo: bool  # the folder holds a `.git` (folder or file, not a symlink)
    subdirs: tuple[str, ...]  # the other sub-folders to walk, `.git` folders not
    links: tuple[tuple[str, str], ...]  # (target, link) of the linked folders in it
    entries: int


@dataclass(frozen=True)
class WorkspaceScanResult:
    secrets: tuple[Path, ...]
    repos: tuple[Path, ...]  # folders holding a `.git`, the roots' own included
    unchecked: str | None = None  # why the walk could not cover the whole workspace (then nothing may run)


class ScanIncomplete(Exception):
    """A folder the walk could not list, or the walk's entry limit."""


class WorkspaceScan:
    """The secret stores and repositories under some roots (`is_secret(path)`: the policy's verdict for an
    absolute path, the same for every walk), linked folders followed once each; folder listings are kept
    between walks, for the folders that still exist."""

    def __init__(self, is_secret: Callable[[str], bool], max_entries: int = MAX_ENTRIES,
                 settled_ns: int = SETTLED_NS, walk_into: Callable[[str, int], bool] | None = None) -> None:
        self.is_secret = is_secret
        self.max_entries = max_entries
        self.settled_ns = settled_ns
        self.walk_into = walk_into  # (a sub-folder's name, its depth below the root): listed? (default: all)
        self._listings: dict[str, _Listing] = {}
        self._lock = threading.Lock()

    def scan(self, roots: Iterable[Path]) -> WorkspaceScanResult:
        with self._lock:
            listed: dict[str, _Listing] = {}
            try:
                self._walk([os.path.realpath(root) for root in roots], listed)
                unchecked = None
            except ScanIncomplete as exc:
                unchecked = str(exc)
            self._listings = listed
            found = dict.fromkeys(secret for listing in listed.values() for secret in listing.secrets)
            repos = [folder for folder, listing in listed.items() if listing.repo]
            return WorkspaceScanResult(tuple(map(Path, found)), tuple(map(Path, repos)), unchecked)

    def _walk(self, roots: list[str], listed: dict[str, _Listing]) -> None:
        """Depth first; `via` is the link through which a folder outside the roots was reached (for messages)."""
        stack: list[tuple[str, str | None, int]] = [(root, None, 0) for root in reversed(roots)]
        entries = 0
        depths: dict[str, int] = {}  # the least depth a folder was walked at (a limited walk goes on from there)
        while stack:
            folder, via, depth = stack.pop()
            if folder in depths and (self.walk_into is None or depths[folder] <= depth):
                continue
            listing = listed.get(folder) or self._listing(folder, roots, via)
            if listing is None:
                continue
            if folder not in listed:
                listed[folder] = listing
                entries += listing.entries
            depths[folder] = depth
            if entries > self.max_entries:
                where = f"the link {_shown(via, roots)} leads to" if via else "it has"
                raise ScanIncomplete(f"{where} over {self.max_entries:,} files and folders")
            stack += reversed(self._below(listing, roots, via, depth + 1))

    def _below(self, listing: _Listing, roots: list[str], via: str | None, depth: int) -> list[tuple[str, str | None, int]]:
        """The folders to walk next from `listing`: sub-folders, then linked folders (a limited walk: those
        `walk_into` takes; the full walk skips asking, the hot path of every shell command)."""
        links, subs, into = listing.links, listing.subdirs, self.walk_into
        if into is not None:
            links = tuple((target, link) for target, link in links if into(os.path.basename(link), depth))
            subs = tuple(sub for sub in subs if into(os.path.basename(sub), depth))
        linked = [(target, via or link, depth) for target, link in links if _walked(target, roots)]
        return [*((sub, via, depth) for sub in subs), *linked]

    def _listing(self, folder: str, roots: list[str], via: str | None) -> _Listing | None:
        try:
            ctime_ns = os.stat(folder).st_ctime_ns
            kept = self._listings.get(folder)
            if kept is not None and kept.ctime_ns == ctime_ns and kept.listed_ns - ctime_ns > self.settled_ns:
                return kept
            return self._list(folder, ctime_ns)
        except OSError as exc:
            if exc.errno in _SKIPPED_ERRORS:
                return None
            where = f"the link {_shown(via, roots)} leads to a folder that" if via else f"{_shown(folder, roots)}"
            raise ScanIncomplete(f"{where} cannot be listed ({exc.strerror or exc})") from None

    def _list(self, folder: str, ctime_ns: int) -> _Listing:
        listed_ns = time.time_ns()
        secrets: list[str] = []
        subdirs: list[str] = []
        links: list[tuple[str, str]] = []
        entries, repo = 0, False
        with os.scandir(folder) as found:
            for entry in found:
                entries += 1
                self._sort(entry, secrets, subdirs, links)
                repo = repo or (entry.name == ".git" and not entry.is_symlink())
        return _Listing(ctime_ns, listed_ns, tuple(secrets), repo, tuple(sorted(subdirs)), tuple(sorted(links)), entries)

    def _sort(self, entry: os.DirEntry[str], secrets: list[str], subdirs: list[str],
              links: list[tuple[str, str]]) -> None:
        path = entry.path
        try:
            if entry.is_symlink():  # reading the link reads its target: hide the target, walk a linked folder
                target = os.path.realpath(path)
                if self.is_secret(path) or self.is_secret(target):
                    secrets.append(target)
                elif os.path.isdir(target):
                    links.append((target, path))
            elif self.is_secret(path):
                secrets.append(path)
            elif entry.is_dir(follow_symlinks=False) and entry.name != ".git":  # git's own files hold no stores
                subdirs.append(path)
        except OSError:
            pass


HOME_MAX_ENTRIES = 200_000
"""Entries listed in one walk of the home folder at most; a larger one is hidden from commands as a whole."""


def home_scan(is_secret: Callable[[str], bool]) -> WorkspaceScan:
    """The walk of the user's home for the secret stores in it (`is_secret`: the policy's deny patterns, and its
    ask patterns in the home-relative path): its entries, those of its dot-folders (`.aws`, `.config`,
    `.cargo`) and of their sub-folders (`.config/gh/hosts.yml`, `.docker/config.json`). Tools keep their
    credentials there; the rest of the home (projects, documents) is not walked: its cost would grow with it."""
    return WorkspaceScan(is_secret, HOME_MAX_ENTRIES, walk_into=_home_folder)


def _home_folder(name: str, depth: int) -> bool:
    return depth == 1 and name.startswith(".") or depth == 2


def _walked(target: str, roots: list[str]) -> bool:
    """A linked folder is walked when it lies inside the roots. Outside them a link leads to what the sandbox
    shows (tools/sandbox.py: the system's folders, with their credential files covered) or to nothing at all,
    so a link to `/` or to the home costs no walk (it made every command refuse: too many entries)."""
    return is_within(Path(target), [Path(root) for root in roots])


def _shown(path: str, roots: list[str]) -> str:
    """A path inside the roots as the workspace tools show it, never one outside them."""
    real_roots = [Path(root) for root in roots]
    if not is_within(Path(path), real_roots):
        return "(a folder outside the workspace)"
    return repr(display_path(path, real_roots)[:200])
