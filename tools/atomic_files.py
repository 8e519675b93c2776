"""Atomic file writes in an opened folder: a new temp file, then a rename over the name; never through a link."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from foundation.errors import Conflict
from foundation.safe_open import opened, unwritable


def version_at(dir_fd: int, name: str) -> tuple[int, int] | None:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return info.st_mtime_ns, info.st_size


def atomic_write(target: Path, data: bytes, expect: tuple[int, int] | None = None) -> None:
    """atomic_write_at for a path whose folder is trusted (tests, server-owned files)."""
    with opened(os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)) as dir_fd:
        atomic_write_at(dir_fd, target.name, data, expect)


def atomic_write_at(dir_fd: int, name: str, data: bytes, expect: tuple[int, int] | None = None,
                    shown: str = "") -> None:
    """Write through a new temp file in the opened folder `dir_fd`, then rename it over `name`.

    Nothing is written through a symlink: the temp file is created O_EXCL|O_NOFOLLOW and the
    rename replaces the name itself. An existing file keeps its permission bits; a new one gets
    the umask's. With `expect` (mtime_ns, size), a file changed by someone else meanwhile is left
    alone (Conflict). A write the OS refuses (permissions, read-only file system) says so, naming `shown`.
    """
    try:
        _write_and_rename(dir_fd, name, data, expect)
    except OSError as exc:
        refused = unwritable(exc, shown or name)
        if refused is None:
            raise
        raise refused from None


def _write_and_rename(dir_fd: int, name: str, data: bytes, expect: tuple[int, int] | None) -> None:
    mode: int | None = None
    with contextlib.suppress(FileNotFoundError):
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        mode = stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else None
    tmp = f".{name[:60]}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        if expect is not None and version_at(dir_fd, name) != expect:
            raise Conflict(f"{name} changed while it was being edited; nothing was written. "
                           "Read it again and repeat the edit.")
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
