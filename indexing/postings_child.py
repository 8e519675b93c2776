"""A postings build in a child process, at a lower priority, one at a time per postings directory.

A merge (the postings rebuilt after a change) reads every chunk's terms and computes for about a minute at
1M chunks. In the serving process it held the GIL in turns with searches (their p50 doubled during it at
1M), and each process of a deployment (`--workers N`) rebuilt the same postings at the same time. Here the
build runs in `python -m indexing.postings_child_main` with a higher nice value, under an exclusive lock on the
postings directory: a process that waited for another's build opens its saved files instead of building
again. The serving process then maps the files (`MemoryIndex`), as after a restart.

The child opens the index's database itself: the SQLite data dir (an argument), or the PostgreSQL URL (in
its environment, never on its command line). It stops when its parent is gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from indexing.scoring import Weighting

if TYPE_CHECKING:
    from foundation.storage import Database

NICENESS = 10  # the child's nice value over its parent's: searches first, the build on what is left
URL_VARIABLE = "GENERALAGENT_POSTINGS_BUILD_URL"
LOCK_NAME = ".build.lock"  # in the postings directory (never removed: a removed lock file locks nothing)


@dataclass(frozen=True)
class ChildBuild:
    """Where a child process finds the index: the SQLite data dir, or a PostgreSQL URL."""

    data_dir: Path
    database_url: str | None = None

    @staticmethod
    def of(database: Database) -> ChildBuild | None:
        """The place of `database`; None on a platform without the lock and nice values (Windows)."""
        if os.name != "posix":
            return None
        url = getattr(database, "url", None)
        return ChildBuild(Path(getattr(database, "data_dir", ".")), url if isinstance(url, str) else None)


@dataclass(frozen=True)
class Built:
    """What the child left in the postings directory: the snapshot of `generation` with `chunks` rows,
    built by it (`built`) or found saved by another process's build."""

    generation: int
    chunks: int
    built: bool


def build_in_child(place: ChildBuild, directory: Path, w: Weighting, min_chunks: int, max_chunks: int) -> Built | None:
    """Run the build of the index's postings into `directory` in a child process; None when the index is
    outside the size range or changed during the build. RuntimeError when the child failed (its last lines
    of output in it)."""
    argv = [sys.executable, "-m", "indexing.postings_child_main", str(os.getpid()), str(place.data_dir),
            str(directory), repr(w.k1), repr(w.b), repr(w.head_weight), str(min_chunks), str(max_chunks)]
    env = {k: v for k, v in os.environ.items() if k != URL_VARIABLE}
    ours = str(Path(__file__).resolve().parent.parent)  # (importable whatever the working directory)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ours, env.get("PYTHONPATH")) if p)
    if place.database_url:
        env[URL_VARIABLE] = place.database_url
    done = subprocess.run(argv, env=env, cwd=directory, capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL)
    said = done.stdout.strip().splitlines()
    if done.returncode != 0 or not said:
        raise RuntimeError(f"the postings build's process ended with {done.returncode}: "
                           + " | ".join(done.stderr.strip().splitlines()[-5:]))
    answer = json.loads(said[-1])
    return Built(int(answer["generation"]), int(answer["chunks"]), bool(answer["built"])) if answer else None
