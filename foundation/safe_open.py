"""Race-free opening of files inside the workspace roots.

`resolve_path` checks a path; between that check and an `open(path)` a component can be swapped
for a symlink to a file outside the roots (the red team leaked outside content in ~3.5% of calls
that way). Here nothing is opened by its full path: the walk starts at a handle of the root and
opens one component at a time relative to the previous folder's handle with O_NOFOLLOW, so a
component that is (now) a symlink fails instead of being followed. The opened descriptor is then
checked itself (fstat for its type; /proc/self/fd or F_GETPATH for where it really is: a folder
renamed out of a root mid-walk is caught there).

`allowed(real_path) -> bool` is the caller's rule for the descriptor's real location (inside a
root, not the server's data folder); it may raise PathNotAllowed with its own reason (a secret store). Errors never show where a symlink points.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from foundation.errors import InvalidInput, NotFound, PathNotAllowed

Allowed = Callable[[Path], bool]
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC  # a FIFO must not hang open()
_WALKS = os.open in os.supports_dir_fd  # False on Windows: there the resolved path is opened directly
_SWAPPED = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)


def _changed(shown: str) -> PathNotAllowed:
    return PathNotAllowed(
        f"Path {shown!r} is not allowed: a part of it is a symlink or changed while it was opened. "
        "Use the file's real path inside the workspace, or try again."
    )


def _root_of(real: Path, roots: Sequence[Path]) -> Path:
    inside = [r for r in roots if real == r or real.is_relative_to(r)]
    if not inside:
        raise PathNotAllowed(f"Path {real.name!r} is not allowed: it is outside the workspace.")
    return max(inside, key=lambda r: len(r.parts))


_DENIED = (errno.EACCES, errno.EPERM)


def denied(shown: str, what: str) -> PathNotAllowed:
    """The plain-words error for a read the OS refused (`what`: the thing, e.g. 'File')."""
    return PathNotAllowed(f"{what} {shown!r} cannot be read: permission denied. Give the server's user read "
                          "access to it, or use another path.")


def unwritable(exc: OSError, shown: str) -> PathNotAllowed | None:
    """The plain-words error for a write the OS refused (permissions, a read-only file system), else None."""
    if exc.errno in _DENIED:
        return PathNotAllowed(f"{shown!r} cannot be written: permission denied. Give the server's user write "
                              "access to its folder, or write somewhere else in the workspace.")
    if exc.errno == errno.EROFS:
        return PathNotAllowed(f"{shown!r} cannot be written: its file system is read-only. Write somewhere else.")
    return None


def _open_root(root: Path) -> int:
    try:
        return os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    except FileNotFoundError:
        raise NotFound(f"The workspace root {str(root)!r} no longer exists. Create it again, or give the "
                       "server another root (--root or GENERALAGENT_ROOTS).") from None
    except OSError as exc:
        if exc.errno not in _DENIED:
            raise
        raise PathNotAllowed(f"The workspace root {str(root)!r} cannot be read: permission denied. Give the "
                             "server's user read access to it, or give the server another root (--root or GENERALAGENT_ROOTS).") from None


def _step(dir_fd: int, name: str, create: bool, shown: str) -> int:
    """Open folder `name` below `dir_fd` (closing `dir_fd`), never following a symlink."""
    try:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, dir_fd=dir_fd)
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise NotFound(f"No folder {shown!r} in the workspace.") from None
    except OSError as exc:
        if exc.errno in _SWAPPED:
            raise _not_a_folder(dir_fd, name, shown) from None
        if exc.errno in _DENIED and not create:
            raise denied(shown, "A folder on the way to") from None
        refused = unwritable(exc, shown) if create else None
        if refused is not None:
            raise refused from None
        raise
    finally:
        os.close(dir_fd)


def _not_a_folder(dir_fd: int, name: str, shown: str) -> Exception:
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return _changed(shown)
    if stat.S_ISLNK(mode):
        return _changed(shown)
    return InvalidInput(f"{name!r} in {shown!r} is a file, not a folder, so no file can be created or read "
                        "below it.")


def fd_real_path(fd: int) -> Path | None:
    """Where an open descriptor really is (None when the platform cannot say)."""
    proc = f"/proc/self/fd/{fd}"
    if os.path.islink(proc):
        return Path(os.readlink(proc))
    import fcntl

    getpath = getattr(fcntl, "F_GETPATH", None)
    if getpath is None:
        return None
    raw = fcntl.fcntl(fd, getpath, bytes(1024))
    return Path(os.fsdecode(raw.split(b"\0", 1)[0]))


def _verify(fd: int, allowed: Allowed, shown: str) -> None:
    where = fd_real_path(fd)
    if where is not None and not allowed(where):
        raise _changed(shown)


def open_dir(real: Path, roots: Sequence[Path], allowed: Allowed, *, create: bool = False, shown: str = "") -> int:
    """A handle of folder `real` (a resolved path inside a root), walked from the root's handle;
    `create=True` makes missing folders on the way (mkdir -p, race-free)."""
    shown = shown or real.name
    root = _root_of(real, roots)
    fd = _open_root(root)
    for name in real.relative_to(root).parts:
        fd = _step(fd, name, create, shown)
    try:
        _verify(fd, allowed, shown)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(real: Path, roots: Sequence[Path], allowed: Allowed, *, shown: str = "") -> int:
    """A read-only descriptor of the regular file `real` (resolved, inside a root), race-free.

    Raises NotFound, PathNotAllowed (a symlink swapped in, or it really is elsewhere) or
    InvalidInput (a folder, device, pipe or socket)."""
    shown = shown or real.name
    if not _WALKS:
        return os.open(real, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    dir_fd = open_dir(real.parent, roots, allowed, shown=shown)
    try:
        fd = os.open(real.name, _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise NotFound(f"No file {shown!r} in the workspace.") from None
    except OSError as exc:
        if exc.errno in _SWAPPED:
            raise _changed(shown) from None
        if exc.errno == errno.ENXIO:  # a socket (open() cannot open one)
            raise InvalidInput(f"{shown!r} is not a regular file (device, pipe or socket) and cannot be read.") from None
        if exc.errno in _DENIED:
            raise denied(shown, "File") from None
        raise
    finally:
        os.close(dir_fd)
    try:
        _check_regular(fd, shown)
        _verify(fd, allowed, shown)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_regular(fd: int, shown: str) -> None:
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        raise InvalidInput(f"{shown!r} is a folder. Call list_workspace_files with directory={shown!r} "
                           '(enable_tools(["list_workspace_files"]) first if it is not listed).')
    if not stat.S_ISREG(mode):
        raise InvalidInput(f"{shown!r} is not a regular file (device, pipe or socket) and cannot be read.")


def open_inside(path: Path, roots: Sequence[Path], allowed: Allowed) -> int:
    """open_file for a path that may still contain symlinks inside the roots (e.g. from a folder
    walk): resolved first, refused unless allowed, then opened race-free at the resolved place."""
    real = Path(os.path.realpath(path))
    if not allowed(real):
        raise PathNotAllowed(f"Path {path.name!r} is not allowed: it resolves outside the workspace.")
    return open_file(real, roots, allowed, shown=path.name)


@contextlib.contextmanager
def opened(fd: int) -> Iterator[int]:
    """Close `fd` when the block ends."""
    try:
        yield fd
    finally:
        os.close(fd)


def read_fd(fd: int, limit: int) -> bytes:
    """Up to `limit` bytes from the start of `fd` (pread: the descriptor's offset is not used)."""
    chunks: list[bytes] = []
    total = 0
    while total < limit:
        chunk = os.pread(fd, min(1 << 20, limit - total), total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)
