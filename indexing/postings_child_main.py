"""The child process of a postings build (`indexing.postings_child`): builds, or finds saved, the
snapshot of the index's generation under the directory's lock, and prints what it left there (JSON)."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from pathlib import Path

from indexing.index import open_store
from indexing.postings import MemoryIndex
from indexing.postings_child import LOCK_NAME, NICENESS, URL_VARIABLE
from indexing.scoring import Weighting


def _main(argv: list[str]) -> None:
    from foundation.storage import open_database

    parent, data_dir, directory, k1, b, head, low, high = argv
    _stop_with(int(parent))  # (its pid as it started this one: it may have ended before this line)
    os.nice(NICENESS)
    store = open_store(open_database(Path(data_dir), os.environ.get(URL_VARIABLE)), move_damaged=False)
    memory = MemoryIndex(store, Weighting(float(k1), float(b), float(head)), min_chunks=int(low),
                         max_chunks=int(high), directory=Path(directory))
    with _locked(Path(directory) / LOCK_NAME):
        snap = memory.build_now()
    answer = None if snap is None else {"generation": snap.generation, "chunks": snap.n_rows,
                                        "built": memory.builds > 0}
    print(json.dumps(answer), flush=True)


class _locked:
    """An exclusive lock on `path` (flock: let go by the kernel when the process ends)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        import fcntl

        self.file = open(self.path, "a+b")  # noqa: SIM115 (held until __exit__)
        fcntl.flock(self.file, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        self.file.close()


def _stop_with(parent: int) -> None:
    """End this process soon after `parent` ends (its build is of no use to anyone then)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(3)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    _main(sys.argv[1:])
