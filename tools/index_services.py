"""The index behind the document tools: the server's `indexing.index.Index` (the front door: store, in-memory
postings, index jobs, secret filter), the indexer of a call and the hybrid mode's vector worker (each
created once per server), and the start-up warm-up."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from foundation.paths import fd_allowed, roots_for
from foundation.safe_open import open_inside
from indexing.model import ChunkingOptions, is_secret_store
from tools.runtime import CallContext, Runtime, Service

if TYPE_CHECKING:  # the index modules load on first use (start-up speed)
    from foundation.storage import Database
    from indexing.embeddings import EmbeddingProvider
    from indexing.index import Index
    from indexing.indexer import Indexer
    from indexing.jobs import JobRegistry
    from indexing.postings import MemoryIndex
    from indexing.store import IndexStore
    from indexing.vectors import VectorWorker


# -- services ---------------------------------------------------------------------------------


def index_of(rt: Runtime) -> Index:
    """This server's index, the front door to it (re-analysed once if made by another analyzer, or when
    the jieba user dictionary changed)."""
    index = _INDEX.of(rt)
    if rt.settings.jieba_user_dict is not None and _USER_DICT.of(rt).changed():
        from indexing.analyzer import analyze, analyzer_version

        index.store.ensure_analysis(analyzer_version(), analyze)
    return index


def index_store(rt: Runtime) -> IndexStore:
    """The shared index database of this server (`index_of(rt).store`)."""
    return index_of(rt).store


class UserDictionary:
    """The jieba user dictionary file, read again when it changed (looked at most once a second)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None
        self._checked = 0.0

    def changed(self) -> bool:
        """Reads the file when it changed since last time; True when jieba's words changed."""
        import logging
        import os

        from foundation.waiting import about_to_wait
        from indexing.analyzer import read_user_words, set_user_words

        now = time.monotonic()
        if self.path is None or now - self._checked < 1.0:
            return False
        self._checked = now
        try:
            info = os.stat(self.path)
            seen = (info.st_mtime_ns, info.st_size)
            if seen == self._seen:
                return False
            about_to_wait()  # reading it and re-analysing the index: not on the event loop
            words = read_user_words(self.path)
        except (OSError, UnicodeDecodeError) as exc:
            logging.getLogger("generalagent.index").warning(
                "the jieba user dictionary %s cannot be read (%s); fix GENERALAGENT_JIEBA_USER_DICT", self.path, exc)
            return False
        self._seen = seen
        return set_user_words(words)


def memory_index(rt: Runtime) -> MemoryIndex:
    """The memory-mapped postings of the shared index (saved in `<data dir>/postings` for either backend,
    rebuilt in the background when the index changed, used when fresh)."""
    return index_of(rt).memory()


def open_index(database: Database) -> IndexStore:
    """The index on the deployment's database (`indexing.index.open_store`: `index.sqlite3` in its data dir,
    or PostgreSQL), re-analysed once if made by another analyzer."""
    from indexing.analyzer import analyze, analyzer_version
    from indexing.index import open_store

    store = open_store(database)
    store.ensure_analysis(analyzer_version(), analyze)
    return store


def search_ready(rt: Runtime, text: str | None = None) -> bool:
    """True when a search will likely need nothing more to load: SQLite, the index's in-memory postings
    loaded and, in hybrid mode, nothing to embed: `text` (a natural-language query; without it, False in
    hybrid mode) is one the re-rank leaves lexical, or its vector is kept. Stale postings, or a query
    vector dropped meanwhile, are met inside the search (`about_to_wait`): it then moves to a worker thread."""
    if rt.settings.database_url:
        return False
    index = _INDEX.peek(rt)
    memory = index.memory_if_made() if index is not None else None
    if memory is None or not memory.loaded:
        return False
    return rt.settings.embedding_provider == "off" or _embeds_nothing(rt, text)


def _embeds_nothing(rt: Runtime, text: str | None) -> bool:
    """In hybrid mode: True when a natural-language search for `text` (no quoted phrase, as a quick search
    is) would embed nothing now: its vector is kept, or the worker is still embedding the chunks (search
    stays lexical until it is done). `auto` without the bundled model: no worker, nothing to embed."""
    if text is None:
        return False
    worker = _VECTOR_WORKER.peek(rt)  # None: not made yet (making it loads the model), or no provider
    if worker is None:
        return rt.settings.embedding_provider == "auto" and not _local_model_installed()
    return worker.embedding() or worker.queries.kept(text)


def _local_model_installed() -> bool:
    from indexing.embeddings import local_model_installed

    return local_model_installed()


def index_jobs(rt: Runtime) -> JobRegistry:
    """The index runs of this server (one per path at a time; background ones outlive their call)."""
    return index_of(rt).jobs()


def stop_index_jobs(rt: Runtime) -> None:
    """The server stops: its index runs stop too and say so (interrupted), when it has any."""
    index = _INDEX.peek(rt)
    if index is not None:
        index.stop_jobs()


def indexer_for(rt: Runtime, call: CallContext | None = None, should_cancel: Callable[[], bool] | None = None,
                session_id: str | None = None, roots: tuple[Path, ...] | None = None,
                busy: Callable[[], bool] | None = None,
                pause: Callable[[Callable[[], bool]], None] | None = None) -> Indexer:
    """The indexer of a call, or of background work: files are opened only inside `roots` (default: the
    session's roots); `busy`, `pause`: see Indexer."""
    from indexing.indexer import Indexer
    s = rt.settings
    limits = rt.extraction_limits()
    chunking = ChunkingOptions(s.chunk_max_chars, s.chunk_overlap_chars, s.chunk_min_chars)
    if call is not None:
        should_cancel, session_id = (lambda: call.cancelled), call.session_id
    roots = roots or roots_for(s, session_id)
    allowed = fd_allowed(s, roots, rt.secret_paths)
    index = index_of(rt)
    return Indexer(index.store, limits, chunking, should_cancel=should_cancel,
                   opener=lambda path: open_inside(path, roots, allowed), secrets=index.secret_filter(roots), busy=busy,
                   pause=pause)


def secret_refusal(shown: str, rule: str) -> str:
    """Why `shown` is not indexed, and what read_file does with it: refuses it too (a `*.secret_denied` rule: a
    secret store) or asks the user for it (`*.secret_read`)."""
    return f"{shown} looks like a secret (rule {rule}); it is not indexed. {_read_file_does(rule, 1)}"


def secrets_note(count: int, denied: int) -> str:
    """What an index run says of the `count` files it skipped as secrets, `denied` of them secret stores."""
    said = f"{'1 file' if count == 1 else f'{count} files'} skipped as secrets (keys, credentials, .env); not indexed."
    if denied and count > denied:
        return (f"{said} For {count - denied} of them {_read_file_does('secret_read', 2)} For the other {denied} "
                f"{_read_file_does('secret_denied', 2)}")
    return f"{said} {_read_file_does('secret_denied' if denied else 'secret_read', count)}"


def _read_file_does(rule: str, count: int) -> str:
    it = "it" if count == 1 else "them"
    if is_secret_store(rule):
        store = "a secret store" if count == 1 else "secret stores"
        return f"read_file refuses {it} too ({store}); the user cannot approve reading {it} through the assistant."
    return f"read_file asks the user for {it}; the user can approve the read."


def secret_hits(rt: Runtime, roots: tuple[Path, ...]) -> Callable[[str], bool] | None:
    """Whether an indexed path found by a search is a secret (None without a policy; `Index.secret_hits`)."""
    return index_of(rt).secret_hits(roots)


def forget_paths(rt: Runtime, paths: list[str], before: Callable[[], None] | None = None,
                 after: Callable[[int], None] | None = None) -> None:
    """Drop these indexed paths, then every document no file uses (`Index.forget`)."""
    index_of(rt).forget(paths, before, after)


def forget_secrets(rt: Runtime) -> None:
    """Forget every indexed path that is a secret (a search met one: the index was made by an older version)."""
    indexer_for(rt).drop_secrets(again=True)


def warm_up_search(rt: Runtime) -> None:
    """Start-up warm-up (background thread): when there is an index, its in-memory postings (every
    search needs them; from then on they follow the index's changes), then jieba's dictionary (Chinese
    text needs it). A data dir that holds an index also keeps a faster copy of the dictionary. Without an
    index nothing is loaded (the dictionary, ~0.3 s of CPU and tens of MB, loads with the first Chinese
    text, off the event loop) and no files are written."""
    from indexing.analyzer import set_cache_dir, warm_up

    if not has_index(rt):
        return
    try:
        set_cache_dir(rt.settings.data_dir / "cache")  # first: a Chinese search meanwhile loads it from there
        memory = memory_index(rt)
        memory.build_now()
        memory.follow()
    finally:
        warm_up()


def has_index(rt: Runtime) -> bool:
    """True when the data store may hold an index (never creates one)."""
    return rt.database.backend == "postgresql" or (rt.settings.data_dir / "index.sqlite3").exists()


MEANING_WARM_UP_S = 30.0  # how long the start-up waits for the vector worker's check (not for a long embedding run)


def warm_up_meaning(rt: Runtime) -> None:
    """Start-up warm-up, in the hybrid mode with an index: load the model, let the vector worker check the
    vectors (and resume embedding what is missing), and read them into memory when every chunk has one. Else
    the first search found the worker checking and stayed lexical: a question in the other language or a
    paraphrase found nothing once after each start."""
    if not has_index(rt):
        return
    worker = vector_worker(rt)
    if worker is None:
        return
    worker.kick()
    worker.wait(MEANING_WARM_UP_S)
    worker.matrix()  # (None, reading nothing, while the worker still embeds: search stays lexical until then)


_USER_DICT: Service[UserDictionary] = Service(lambda rt: UserDictionary(rt.settings.jieba_user_dict))


def _opened_index(rt: Runtime) -> Index:
    from indexing.index import Index, PostingsPlace

    _USER_DICT.of(rt).changed()  # its words first: the index is analysed with them
    s = rt.settings
    place = PostingsPlace(rt.data_dir / "postings", s.search_memory_min_chunks, s.search_memory_max_chunks)
    return Index(open_index(rt.database), rt.database, place, policy=lambda: rt.secret_paths)


_INDEX: Service[Index] = Service(_opened_index)


def vector_worker(rt: Runtime) -> VectorWorker | None:
    """The background embedder of the hybrid mode; None when no embedding provider is configured."""
    return _VECTOR_WORKER.of(rt)


def embed_new_chunks(rt: Runtime, wait: bool = False) -> None:
    """After the folder watcher or a search re-indexed changed files: this process's vector worker, when it has
    one, embeds their new chunks now (until they have vectors, searches are lexical). `wait`: a search that
    re-indexed them waits for that (VectorWorker.catch_up)."""
    worker = _VECTOR_WORKER.peek(rt)  # (a process without one, e.g. the watcher's own, leaves it to the servers)
    if worker is None:
        return
    if wait:
        worker.catch_up()
    else:
        worker.kick()


def embedding_provider(rt: Runtime) -> EmbeddingProvider | None:
    """The configured embedding model, made once per server: chunk vectors and memory recall share it
    (None when the hybrid mode is off; SettingsError when it is misconfigured)."""
    return _EMBEDDING_PROVIDER.of(rt)


def _new_embedding_provider(rt: Runtime) -> EmbeddingProvider | None:
    from indexing.embeddings import make_provider

    return make_provider(rt.settings)


def _new_vector_worker(rt: Runtime) -> VectorWorker | None:
    from indexing.vectors import VectorWorker

    provider = embedding_provider(rt)
    if provider is None:
        return None
    return VectorWorker(index_store(rt), provider,
                        exclusive=lambda: rt.database.advisory_lock("chunk-vectors", timeout=0),
                        place=rt.data_dir / "vectors")


_EMBEDDING_PROVIDER: Service[EmbeddingProvider | None] = Service(_new_embedding_provider)
_VECTOR_WORKER: Service[VectorWorker | None] = Service(_new_vector_worker)
