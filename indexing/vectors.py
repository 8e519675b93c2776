"""Chunk vectors for the hybrid mode: stored with their chunk, computed in the background.

The table `chunk_vectors` (migration 4 in `indexing.store`) holds one int8 vector + scale per
chunk; `ON DELETE CASCADE` removes it with its chunk. The meta key `vectors_model` names the
provider the vectors were made with: another provider or model empties the table, and the
worker computes them again. The worker embeds the chunks that have no vector yet in batches, so
it resumes where it stopped (restart, cancel) and picks up new chunks after every indexing run.
It runs at a low CPU priority (nice 10), so searches and indexing come first.

Below `ANN_MIN_CHUNKS` chunks, searches read every vector into memory (`indexing.exact_vectors.VectorMatrix`:
the stored int8 rows, ~0.4 KB a chunk at 384 dimensions, read again after each change of the chunks). From
`ANN_MIN_CHUNKS` on (and with `usearch` installed: the semantic extra), `indexing.ann.AnnVectors`, which the
worker's thread keeps in step by a diff after each of its runs and saves under the data directory (searches stay
lexical while it is behind the store); it answers by the same exact int8 pass up to `indexing.ann.FLAT_MAX`
rows, and by an approximate graph per language beyond (bench.ann_cost, bench.hybrid_cost).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, suppress
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from foundation.waiting import about_to_wait
from indexing.analyzer import is_chinese
from indexing.embeddings import EmbeddingProvider, QueryVectors, StoredVectors, from_int8_rows, to_int8
from indexing.store import put_meta

if TYPE_CHECKING:
    import numpy as np

    from indexing.ann import AnnVectors
    from indexing.exact_vectors import VectorMatrix
    from indexing.store import IndexStore

log = logging.getLogger(__name__)

BATCH = 32
MODEL_KEY = "vectors_model"
NICE = 10  # the worker thread's CPU priority (Linux: per thread; its engine threads inherit it)
RECHECK_SECONDS = 5.0  # an incomplete matrix (another process embedding) is read again at most this often
CLOSE_WAIT_S = 0.5  # closing waits this long for a batch in progress: a one-shot CLI command exits promptly
CATCH_UP_S = 0.5  # a search waits this long at most for the vectors of chunks indexed since the last run (catch_up)
# From this many chunks on, the vectors are kept by indexing.ann (in step by a diff, not read whole after each
# change: at 100k chunks a whole read takes 3-7 s, most of it the SQL read of every row and chunk text).
ANN_MIN_CHUNKS = 20_000


class DenseScorer(Protocol):
    """One query over the chunk vectors: per language (0: other, 1: Chinese) the chunks' count and the sum
    of their cosines and of their squares; the nearest chunks of each language; any chunks' cosines."""

    counts: np.ndarray
    sums: np.ndarray
    squares: np.ndarray

    def top(self, k: int) -> list[int]: ...

    def cosines(self, ids: Sequence[int]) -> np.ndarray: ...


class DenseVectors(Protocol):
    """Every chunk's vector, searchable: `ids` ascending, `chinese` flags in that order."""

    ids: np.ndarray
    chinese: np.ndarray

    def __len__(self) -> int: ...

    def position(self, ids: Sequence[int]) -> np.ndarray: ...

    def scorer(self, query: np.ndarray) -> DenseScorer: ...


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

    def matrix(self) -> VectorMatrix:
        """Every stored vector, in memory (reads the whole table: once per change, not per search)."""
        from indexing.exact_vectors import VectorMatrix

        stored = self.stored()
        dim = len(stored.blobs[0]) if stored.blobs else 0
        return VectorMatrix(stored.ids, stored.codes(dim), stored.scales, stored.chinese)

    def stored(self, ids: Sequence[int] | None = None) -> StoredVectors:
        """The stored vectors, by chunk id: all of them, or those of `ids` that have one."""
        import numpy as np

        if ids is not None and not len(ids):
            return StoredVectors(np.zeros(0, np.int64), [], np.zeros(0, np.float64), np.zeros(0, bool))
        where = "" if ids is None else f"WHERE v.chunk_id IN ({','.join(str(int(i)) for i in ids)}) "
        rows = self.store.conn().execute(
            "SELECT v.chunk_id, v.vec, v.scale, c.text FROM chunk_vectors v JOIN chunks c ON c.id = v.chunk_id "
            f"{where}ORDER BY v.chunk_id"
        ).fetchall()
        return StoredVectors(np.array([int(r[0]) for r in rows], dtype=np.int64), [bytes(r[1]) for r in rows],
                             np.array([float(r[2]) for r in rows], dtype=np.float64),
                             np.array([is_chinese(str(r[3])) for r in rows], dtype=bool))

    def scales(self) -> tuple[np.ndarray, np.ndarray]:
        """(chunk ids, their vectors' scales), by chunk id: what tells a changed vector from a kept one."""
        import numpy as np

        rows = self.store.conn().execute("SELECT chunk_id, scale FROM chunk_vectors ORDER BY chunk_id").fetchall()
        pairs = np.array(rows, dtype=np.float64).reshape(len(rows), 2)  # chunk ids < 2**53: exact as float64
        return pairs[:, 0].astype(np.int64), pairs[:, 1]

    def dimensions(self) -> int | None:
        """The stored vectors' dimensions (one int8 byte each), None while there is none."""
        row = self.store.conn().execute("SELECT length(vec) FROM chunk_vectors LIMIT 1").fetchone()
        return None if row is None else int(row[0])

    def progress(self) -> tuple[int, int]:
        """(chunks with a vector, chunks)."""
        done = self.store.conn().execute("SELECT count(*) FROM chunk_vectors").fetchone()[0]
        return int(done), self.store.generation()[1]


class VectorWorker:
    """Computes the missing vectors in a background thread; `kick()` after indexing, `cancel()` to stop."""

    def __init__(self, store: IndexStore, provider: EmbeddingProvider,
                 exclusive: Callable[[], AbstractContextManager[bool]] | None = None,
                 place: Path | None = None, ann_min: int = ANN_MIN_CHUNKS) -> None:
        self.vectors = VectorStore(store)
        self.place = place  # where the approximate index is saved (None: kept in memory only)
        self.ann_min = ann_min
        self._ann: AnnVectors | None = None
        self._ann_tried = 0.0  # when the worker last brought it in step
        self.provider = provider
        self.queries = QueryVectors(provider)  # the searches' query vectors, kept as long as the worker (the server)
        self.exclusive = exclusive  # a lock shared by the processes on one database: one embeds at a time
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._active = False  # a run is under way (its thread decides to end under _lock, so no kick is lost)
        self._again = False  # a kick came during the run: it looks for chunks without a vector once more
        self._stop = threading.Event()
        self.error = ""
        self._complete_at: int | None = None  # the chunks' generation at which a run left nothing missing
        self._settled = threading.Event()  # clear from kick() until its run finds no chunk without a vector (of this model)
        self._settled.set()
        self._long_run = False  # the run found a whole batch of chunks without a vector: more may follow
        self._puts = 0  # batches stored by this worker: the matrix is read again after a change
        self._matrix: VectorMatrix | None = None
        self._matrix_key: tuple[int, int] | None = None
        self._matrix_read = 0.0
        self._matrix_lock = threading.Lock()

    def matrix(self) -> DenseVectors | None:
        """Every chunk's vector in memory, or None while some chunk has none (the worker is embedding:
        searches stay lexical until it is done). Read again after indexing or embedding changed them.
        From `ann_min` chunks on, the approximate index, when the worker has brought it in step."""
        if self.embedding():
            return None
        generation, total = self.vectors.store.generation()
        if self.approximate(total):
            self._matrix = self._matrix_key = None  # the exact matrix is not read at this size
            ann = self._ann
            return ann if ann is not None and ann.generation == generation and len(ann) >= total > 0 else None
        with self._matrix_lock:
            key = (generation, self._puts)
            stale = self._matrix_key != key or (
                self._matrix is not None and len(self._matrix) < total and time.monotonic() - self._matrix_read > RECHECK_SECONDS)
            if self._matrix is None or stale:
                about_to_wait()  # reads every vector: never on the event loop
                self._matrix, self._matrix_key, self._matrix_read = self.vectors.matrix(), key, time.monotonic()
            matrix = self._matrix
        return matrix if total > 0 and len(matrix) >= total else None

    def running(self) -> bool:
        """True from kick() until the worker's thread decides to end (under the kick's lock)."""
        return self._active

    def embedding(self) -> bool:
        """True while the worker's run may still add or replace vectors: from kick() until it finds none
        missing (its thread may live on a little after that: checks at nice 10, the approximate index)."""
        return not self._settled.is_set() and self.running()

    def wait_embedded(self, seconds: float) -> bool:
        """Until the worker's run finds no chunk without a vector or its thread ends (another process held the
        embedding, or it failed), for at most `seconds`; True when it is not embedding then. Not for a run with
        more than a batch to embed (it ends at once then: such a run outlasts any short wait)."""
        deadline = time.monotonic() + seconds
        while not self._settled.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
            if not self.running() or self._long_run or time.monotonic() >= deadline:
                break
        return not self.embedding()

    def catch_up(self, seconds: float = CATCH_UP_S) -> None:
        """Kick the worker; when that starts a run although every chunk had its vector (files re-indexed since,
        by this process or another, e.g. a separate watcher's), wait for the run, up to `seconds` and unless it
        has more than a batch to embed: the caller's search then uses meaning for those files too, where it went
        lexical until the run ended."""
        complete = not self.embedding()
        self.kick()
        if complete and self.embedding():
            self.wait_embedded(seconds)

    def kick(self) -> None:
        """Start the worker unless it runs already, or nothing changed since every chunk had its vector
        (searches kick it: without this each one would scan the chunks for missing vectors)."""
        generation = self.vectors.store.generation()[0]
        with self._lock:
            if self._active:  # its last look for missing vectors may come before these chunks did: once more
                if self._complete_at != generation:
                    self._again = True
                    self._settled.clear()
                return
            if self._complete_at == generation and not self._ann_behind():
                return
            about_to_wait()  # starting a thread (it waits for the thread to run): not from the event loop
            self._stop.clear()
            self._settled.clear()
            self._active, self._again, self._long_run = True, False, False
            self._thread = threading.Thread(target=self._run_logged, name="chunk-vectors", daemon=True)
            self._thread.start()

    def cancel(self) -> None:
        """Stop the worker's run after its batch in progress."""
        self._stop.set()

    def close(self) -> None:
        """Stop the worker before the store it writes to closes: it stops after its batch in progress, waited
        for at most CLOSE_WAIT_S (a batch still running then ends quietly on the closed store)."""
        self.cancel()
        self.wait(CLOSE_WAIT_S)

    def wait(self, seconds: float) -> None:
        """Until the worker's run (if any) ends, for at most `seconds`."""
        thread = self._thread
        if thread is not None:
            thread.join(seconds)

    def run(self) -> int:
        """Embed every chunk that lacks a vector (until cancelled); returns how many were embedded."""
        self.vectors.use_model(self.provider.name)
        generation = self.vectors.store.generation()[0]
        done = 0
        while not self._stop.is_set():
            rows = self.vectors.missing(BATCH)
            self._long_run = self._long_run or len(rows) == BATCH
            if not rows:
                with self._lock:
                    self._complete_at = generation
                    if not self._again:  # (else a kick since its look: the next run settles)
                        self._settled.set()
                break
            self.vectors.put(rows, self.provider.embed([chunk_text(h, t) for _, h, t in rows], query=False))
            self._puts += 1
            done += len(rows)
        return done

    def approximate(self, total: int) -> bool:
        """True when `total` chunks are searched through the approximate index."""
        return total >= self.ann_min and ann_installed()

    def _ann_behind(self) -> bool:
        """The approximate index should serve but is behind the store, and was not brought in step lately."""
        generation, total = self.vectors.store.generation()
        ann = self._ann
        behind = ann is None or ann.generation != generation or len(ann) < total
        return self.approximate(total) and behind and time.monotonic() - self._ann_tried > RECHECK_SECONDS

    def sync_ann(self) -> None:
        """Bring the approximate index in step with the stored vectors (loaded from `place` first, saved
        there after enough changes); dropped below `ann_min` chunks."""
        self._ann_tried = time.monotonic()
        if not self.approximate(self.vectors.store.generation()[1]):
            self._ann = None
            return
        from indexing.ann import AnnVectors

        ann = self._ann
        if ann is None:
            dim = self.vectors.dimensions()
            if dim is None:
                return
            ann = (AnnVectors.load(self.place, self.provider.name, dim) if self.place else None) or AnnVectors(dim, self.provider.name)
        ann = ann.sync(self.vectors)
        if self.place is not None and ann.should_save():
            ann.save(self.place)
        self._ann = ann

    def _run_logged(self) -> None:
        lower_priority()
        more = True
        try:
            while more:
                self._run_once_logged()
                more = self._more()
        finally:
            if more:  # ended by an exception the run let through
                with self._lock:
                    self._active = False

    def _more(self) -> bool:
        """After a run: True when a kick asked for one more, else the worker ends (decided under the lock)."""
        with self._lock:
            more = self._again and not self._stop.is_set()
            self._active, self._again = more, False
            return more

    def _run_once_logged(self) -> None:
        try:
            mine = True
            if self.exclusive is None:
                self.run()
            else:
                with self.exclusive() as mine:
                    if mine:  # else another process is embedding these chunks; a later kick() looks again
                        self.run()
            if not self._stop.is_set() and (mine or self._ann_behind()):  # not at every kick while another embeds
                self.sync_ann()
            self.error = ""
        except Exception as exc:  # lexical search keeps working; the next kick() retries
            if self._stop.is_set():  # stopped while closing: the store may be closed under it
                log.debug("chunk vectors stopped: %s", exc)
                return
            self.error = f"{type(exc).__name__}: {exc}"[:200]
            log.exception("computing chunk vectors failed")

    def status(self) -> str:
        """For index_status: "vectors: N of M chunks", whether searches use them now (by `matrix()`, as a search
        does: lexical until every chunk has one and they are read in), and why it stopped, if it failed."""
        done, total = self.vectors.progress()
        if self.matrix() is not None:
            state = "meaning-aware search on"
        elif total and done >= total:
            state = "reading them in, lexical until then"
        else:
            state = "embedding in the background, lexical until done"
        return f"vectors: {done:,} of {total:,} chunks ({state})" + (f" (last error: {self.error})" if self.error else "")


@cache
def ann_installed() -> bool:
    """True when the approximate index's library (`usearch`, the semantic extra) can be imported."""
    import importlib.util

    return importlib.util.find_spec("usearch") is not None


def lower_priority() -> None:
    """The calling thread at nice NICE (Linux sets it per thread; threads it starts inherit it)."""
    with suppress(AttributeError, OSError):  # not Linux, or not allowed: full priority
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
