"""Chunk vectors for the hybrid mode: stored with their chunk, computed in the background.

The table `chunk_vectors` (migration 4 in `indexing.store`) holds one int8 vector + scale per
chunk; `ON DELETE CASCADE` removes it with its chunk. The meta key `vectors_model` names the
provider the vectors were made with: another provider or model empties the table, and the
worker computes them again. The worker embeds the chunks that have no vector yet in batches, so
it resumes where it stopped (restart, cancel) and picks up new chunks after every indexing run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from foundation.waiting import about_to_wait
from indexing.embeddings import EmbeddingProvider, QueryVectors, from_int8_rows, to_int8
from indexing.store import put_meta

if TYPE_CHECKING:
    import numpy as np

    from indexing.store import IndexStore

log = logging.getLogger(__name__)

BATCH = 32
MODEL_KEY = "vectors_model"


def chunk_text(heading: str, text: str) -> str:
    """What is embedded for a chunk: its heading (the title, in documents) and its text."""
    return f"{heading}\n{text}" if heading else text


class VectorStore:
    """Reads and writes of `chunk_vectors` in one index store."""

    def __init__(self, store: IndexStore) -> None:
        self.store = store

    def use_model(self, name: str) -> None:
        """Drop every vector made with another model than `name`."""
        if self.store.get_meta(MODEL_KEY) == name:
            return
        with self.store.write() as conn:
            conn.execute("DELETE FROM chunk_vectors")
            put_meta(conn, MODEL_KEY, name)

    def missing(self, limit: int) -> list[tuple[int, str, str]]:
        """(id, heading, text) of up to `limit` chunks without a vector, oldest first."""
        rows = self.store.conn().execute(
            "SELECT c.id, c.heading, c.text FROM chunks c LEFT JOIN chunk_vectors v ON v.chunk_id = c.id "
            "WHERE v.chunk_id IS NULL ORDER BY c.id LIMIT ?", (limit,)
        ).fetchall()
        return [(int(i), str(h), str(t)) for i, h, t in rows]

    def put(self, rows: Sequence[tuple[int, str, str]], vectors: np.ndarray) -> None:
        """Store the vectors of `rows` (from `missing`), skipping chunks deleted or replaced since."""
        with self.store.write() as conn:
            for (chunk_id, heading, text), vector in zip(rows, vectors, strict=True):
                blob, scale = to_int8(vector)
                conn.execute(
                    "INSERT INTO chunk_vectors(chunk_id, vec, scale) SELECT ?, ?, ? "
                    "WHERE EXISTS(SELECT 1 FROM chunks WHERE id = ? AND heading = ? AND text = ?) "
                    "ON CONFLICT(chunk_id) DO UPDATE SET vec=excluded.vec, scale=excluded.scale",
                    (chunk_id, blob, scale, chunk_id, heading, text),
                )

    def get(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The vectors of those of `ids` that have one."""
        if not ids:
            return {}
        rows = self.store.conn().execute(
            f"SELECT chunk_id, vec, scale FROM chunk_vectors WHERE chunk_id IN ({','.join(map(str, ids))})"
        ).fetchall()
        vectors = from_int8_rows([bytes(r[1]) for r in rows], [float(r[2]) for r in rows])
        return {int(r[0]): v for r, v in zip(rows, vectors, strict=True)}

    def progress(self) -> tuple[int, int]:
        """(chunks with a vector, chunks)."""
        done = self.store.conn().execute("SELECT count(*) FROM chunk_vectors").fetchone()[0]
        return int(done), self.store.generation()[1]


class VectorWorker:
    """Computes the missing vectors in a background thread; `kick()` after indexing, `cancel()` to stop."""

    def __init__(self, store: IndexStore, provider: EmbeddingProvider,
                 exclusive: Callable[[], AbstractContextManager[bool]] | None = None) -> None:
        self.vectors = VectorStore(store)
        self.provider = provider
        self.queries = QueryVectors(provider)  # the searches' query vectors, kept as long as the worker (the server)
        self.exclusive = exclusive  # a lock shared by the processes on one database: one embeds at a time
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.error = ""
        self._complete_at: int | None = None  # the chunks' generation at which a run left nothing missing

    def kick(self) -> None:
        """Start the worker unless it runs already, or nothing changed since every chunk had its vector
        (searches kick it: without this each one would scan the chunks for missing vectors)."""
        generation = self.vectors.store.generation()[0]
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            if self._complete_at == generation:
                return
            about_to_wait()  # starting a thread (it waits for the thread to run): not from the event loop
            self._stop.clear()
            self._thread = threading.Thread(target=self._run_logged, name="chunk-vectors", daemon=True)
            self._thread.start()

    def cancel(self, wait: float | None = None) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and wait is not None:
            thread.join(wait)

    def run(self) -> int:
        """Embed every chunk that lacks a vector (until cancelled); returns how many were embedded."""
        self.vectors.use_model(self.provider.name)
        generation = self.vectors.store.generation()[0]
        done = 0
        while not self._stop.is_set():
            rows = self.vectors.missing(BATCH)
            if not rows:
                self._complete_at = generation
                break
            self.vectors.put(rows, self.provider.embed([chunk_text(h, t) for _, h, t in rows], query=False))
            done += len(rows)
        return done

    def _run_logged(self) -> None:
        try:
            if self.exclusive is None:
                self.run()
            else:
                with self.exclusive() as mine:
                    if not mine:  # another process is embedding these chunks; a later kick() looks again
                        return
                    self.run()
            self.error = ""
        except Exception as exc:  # lexical search keeps working; the next kick() retries
            self.error = f"{type(exc).__name__}: {exc}"[:200]
            log.exception("computing chunk vectors failed")

    def status(self) -> str:
        """For index_status: "vectors: N of M chunks" (and why it stopped, if it failed)."""
        done, total = self.vectors.progress()
        return f"vectors: {done:,} of {total:,} chunks" + (f" (last error: {self.error})" if self.error else "")
