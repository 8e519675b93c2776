"""An iterative folder walker and a recursion-free tree remover (deep trees cost no stack)."""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from foundation.paths import INDEX_DIR_NAMES, is_decodable, is_within


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
    directory entries (then `truncated` is True). Unreadable folders are counted in `errors` (the first
    few named in `unreadable`); entries whose name is not valid UTF-8 are skipped, never yielded (JSON
    and the index cannot carry them), and counted in `undecodable` (the first few named, escaped, in
    `undecodable_names`). `skipped_note()` says both in words that name the fix.
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
        self.unreadable: list[str] = []
        self.undecodable = 0
        self.undecodable_names: list[str] = []
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
            scan = scan_folder(folder)
        except OSError:
            self.errors += 1
            if len(self.unreadable) < _NAMED:
                self.unreadable.append(self._rel(folder))
            return []
        self.undecodable += len(scan.undecodable)
        for name in scan.undecodable[: max(0, _NAMED - len(self.undecodable_names))]:
            self.undecodable_names.append(escaped_name(self._rel(folder / name)))
        return scan.entries

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path != self.root else self.root.name or str(self.root)

    def skipped_note(self) -> str | None:
        """What the walk skipped besides hidden and server folders, in words that name the fix."""
        return skipped_note(self.errors, self.unreadable, self.undecodable, self.undecodable_names)

    def _push(self, stack: list[tuple[Path, int]], subdirs: list[Path], depth: int) -> None:
        keep = [d for d in subdirs if d.name not in self.skip_dir_names and d not in self.skip_paths]
        if keep and depth + 1 > self.max_depth:
            self.depth_capped += len(keep)
            return
        stack.extend((d, depth + 1) for d in reversed(keep))

    def _file_entry(self, entry: os.DirEntry[str], depth: int) -> WalkEntry | None:
        info = regular_file_stat(entry, self.confine_to)
        if info is None:
            return None
        path = Path(entry.path)
        rel = path.relative_to(self.root).as_posix()
        return WalkEntry(path=path, rel=rel, size=info.st_size, mtime=info.st_mtime, depth=depth)


_NAMED = 5  # skipped names shown in a note


@dataclass(frozen=True)
class FolderScan:
    entries: list[os.DirEntry[str]]  # sorted by name, every name valid UTF-8
    undecodable: list[str]  # names that are not valid UTF-8 (as Python decodes them: lone surrogates)
    truncated: bool = False  # stopped at `limit` entries

    def note(self) -> str | None:
        """What `skipped_note` says of the names set apart (None when there are none)."""
        return skipped_note(0, [], len(self.undecodable), [escaped_name(n) for n in self.undecodable[:_NAMED]])


def scan_folder(folder: Path | int, limit: int | None = None) -> FolderScan:
    """The entries of one folder, sorted; names that are not valid UTF-8 are set apart. This is where
    names from disk enter every listing, walk and index: a name Python can only decode to lone surrogates
    cannot be sent as JSON, stored or typed back by a model, so it is skipped and reported (renaming the
    file is the fix), never shown. `folder`: a path or an open folder's descriptor. Raises OSError (e.g.
    PermissionError) when the folder cannot be read."""
    entries: list[os.DirEntry[str]] = []
    undecodable: list[str] = []
    with os.scandir(folder) as it:
        for entry in it:
            if limit is not None and len(entries) + len(undecodable) >= limit:
                return FolderScan(sorted(entries, key=lambda e: e.name), sorted(undecodable), truncated=True)
            if is_decodable(entry.name):
                entries.append(entry)
            else:
                undecodable.append(entry.name)
    return FolderScan(sorted(entries, key=lambda e: e.name), sorted(undecodable))


def escaped_name(name: str) -> str:
    """A name's bytes with each byte that is not UTF-8 written as \\xNN (for messages only)."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def skipped_note(unreadable: int, unreadable_names: list[str], undecodable: int,
                 undecodable_names: list[str]) -> str | None:
    notes = []
    if unreadable:
        s = "" if unreadable == 1 else "s"
        notes.append(f"{unreadable} unreadable folder{s} skipped ({_listed(unreadable, unreadable_names)}): "
                     f"give the server's user read access to include {'it' if unreadable == 1 else 'them'}")
    if undecodable:
        s, it = ("", "it") if undecodable == 1 else ("s", "them")
        notes.append(f"{undecodable} file{s} or folder{s} with a name that is not valid UTF-8 skipped "
                     f"({_listed(undecodable, undecodable_names)}); rename {it} to include {it}")
    return "; ".join(notes) or None


def _listed(count: int, names: list[str]) -> str:
    shown = ", ".join(names)
    return shown + (f" and {count - len(names)} more" if count > len(names) else "")


walk_files = FileWalk  # an iterable over the files under a root; check `.truncated` afterwards


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


def regular_file_stat(entry: os.DirEntry[str], confine_to: Collection[Path]) -> os.stat_result | None:
    """The stat of `entry` when it is a regular file, through a link only when the link's target lies inside
    `confine_to`; None for anything else (a folder, a device, a link out, an entry gone meanwhile)."""
    try:
        if entry.is_symlink():
            real = Path(os.path.realpath(entry.path))
            if not is_within(real, confine_to):
                return None
            info = os.stat(real)
        else:
            info = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    return info if stat.S_ISREG(info.st_mode) else None
