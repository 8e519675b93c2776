"""Is an indexed file still what was indexed? One `stat` per distinct path, compared with the size and
mtime stored when it was indexed (one query for all of them). A search asks this of the files of the
page it is about to return: a hit whose file changed is never returned as if it were current.

A file whose row was expired by a chunking change (`mtime_ns = -1`, see `IndexStore.ensure_chunking`)
counts as changed only when its size differs: its text is still the file's, only to be chunked again.
Gone files are not listed here (the caller forgets them: `os.stat` fails).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from indexing.store import IndexStore

EXPIRED_MTIME = -1


@dataclass(frozen=True)
class Changed:
    """An indexed file whose size or mtime on disk is no longer the indexed one."""

    path: str
    size: int  # its size on disk now


def changed_files(store: IndexStore, paths: Iterable[str]) -> list[Changed]:
    """The files among `paths` (indexed paths; duplicates and "" ignored) changed on disk since they
    were indexed, in the order first given."""
    distinct = list(dict.fromkeys(p for p in paths if p))
    if not distinct:
        return []
    marks = ",".join("?" * len(distinct))
    rows = store.conn().execute(f"SELECT path, size, mtime_ns FROM files WHERE path IN ({marks})", distinct)
    stored = {path: (size, mtime) for path, size, mtime in rows.fetchall()}
    out = []
    for path in distinct:
        if path not in stored:
            continue
        try:
            info = os.stat(path)
        except OSError:
            continue
        size, mtime = stored[path]
        if info.st_size != size or (mtime != EXPIRED_MTIME and info.st_mtime_ns != mtime):
            out.append(Changed(path, info.st_size))
    return out
