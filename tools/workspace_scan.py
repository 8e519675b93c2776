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
so a command in a large workspace costs one `stat` per folder once the first walk is done.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

MAX_ENTRIES = 100_000
"""Entries listed in one walk at most; a larger workspace is walked up to there (said in the result)."""
SETTLED_NS = 2_000_000_000
"""A folder changed less than this long ago is listed again (file systems with coarse timestamps)."""


@dataclass(frozen=True)
class _Listing:
    ctime_ns: int
    secrets: tuple[str, ...]  # secret entries of the folder (a symlink: its target)
    repo: bool  # the folder holds a `.git` (folder or file, not a symlink)
    subdirs: tuple[str, ...]  # the other real sub-folders, to walk
    entries: int


@dataclass(frozen=True)
class WorkspaceScanResult:
    secrets: tuple[Path, ...]
    repos: tuple[Path, ...]  # folders holding a `.git`, the roots' own included
    complete: bool  # False: the walk stopped at MAX_ENTRIES


class WorkspaceScan:
    """The secret stores and repositories under some roots (`is_secret(path)`: the policy's verdict for an absolute path,
    the same for every walk); folder listings are kept between walks, for the folders that still exist."""

    def __init__(self, is_secret: Callable[[str], bool], max_entries: int = MAX_ENTRIES,
                 settled_ns: int = SETTLED_NS) -> None:
        self.is_secret = is_secret
        self.max_entries = max_entries
        self.settled_ns = settled_ns
        self._listings: dict[str, _Listing] = {}
        self._lock = threading.Lock()

    def scan(self, roots: Iterable[Path]) -> WorkspaceScanResult:
        with self._lock:
            listed: dict[str, _Listing] = {}
            found: list[str] = []
            repos: list[str] = []
            stack = [os.path.realpath(root) for root in reversed(list(roots))]
            entries, complete = 0, True
            while stack:
                folder = stack.pop()
                if folder in listed or (listing := self._listing(folder)) is None:
                    continue
                listed[folder] = listing
                found += listing.secrets
                repos += [folder] if listing.repo else []
                entries += listing.entries
                if entries > self.max_entries:
                    complete = False
                    break
                stack += reversed(listing.subdirs)
            self._listings = listed
            return WorkspaceScanResult(tuple(Path(p) for p in dict.fromkeys(found)), tuple(Path(p) for p in repos),
                                       complete)

    def _listing(self, folder: str) -> _Listing | None:
        try:
            ctime_ns = os.stat(folder).st_ctime_ns
        except OSError:
            return None
        kept = self._listings.get(folder)
        if kept is not None and kept.ctime_ns == ctime_ns and time.time_ns() - ctime_ns > self.settled_ns:
            return kept
        return self._list(folder, ctime_ns)

    def _list(self, folder: str, ctime_ns: int) -> _Listing | None:
        secrets: list[str] = []
        subdirs: list[str] = []
        entries, repo = 0, False
        try:
            with os.scandir(folder) as found:
                for entry in found:
                    entries += 1
                    self._sort(entry, secrets, subdirs)
                    repo = repo or (entry.name == ".git" and not entry.is_symlink())
        except OSError:  # unreadable: a command cannot read it either
            return None
        return _Listing(ctime_ns, tuple(secrets), repo, tuple(sorted(subdirs)), entries)

    def _sort(self, entry: os.DirEntry[str], secrets: list[str], subdirs: list[str]) -> None:
        path = entry.path
        try:
            if entry.is_symlink():  # reading the link reads its target: hide the target
                target = os.path.realpath(path)
                if self.is_secret(path) or self.is_secret(target):
                    secrets.append(target)
            elif self.is_secret(path):
                secrets.append(path)
            elif entry.is_dir(follow_symlinks=False):
                subdirs.append(path)
        except OSError:
            pass
