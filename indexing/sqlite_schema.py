"""The index's tables in SQLite, as ordered migrations (PostgreSQL's: indexing/pg_schema.py)."""

from __future__ import annotations

MMAP_BYTES = 64 * 1024 * 1024
"""How much of the file each connection maps (SQLite maps no more than the file holds, and more as it
grows): reads map the file instead of copying pages (search fetches scattered rows). Each connection
maps its own copy, all counted in the server's RSS: 5 connections (the read pool and the writer) map at
most 320 MiB."""
PRAGMAS = ("synchronous=NORMAL", "foreign_keys=ON", f"mmap_size={MMAP_BYTES}")  # every connection's

MIGRATIONS: list[str] = [
    # 1: the initial schema
    """
    CREATE TABLE documents(
        id INTEGER PRIMARY KEY,
        hash TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        chars INTEGER NOT NULL,
        n_chunks INTEGER NOT NULL,
        warnings TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL
    );
    CREATE TABLE files(
        path TEXT PRIMARY KEY,
        doc_id INTEGER REFERENCES documents(id),
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        indexed_at REAL NOT NULL,
        error TEXT
    );
    CREATE INDEX files_doc ON files(doc_id);
    CREATE TABLE chunks(
        id INTEGER PRIMARY KEY,
        doc_id INTEGER NOT NULL REFERENCES documents(id),
        idx INTEGER NOT NULL,
        start INTEGER NOT NULL,
        end INTEGER NOT NULL,
        heading TEXT NOT NULL DEFAULT '',
        page INTEGER, slide INTEGER, sheet TEXT, row_first INTEGER, row_last INTEGER,
        text TEXT NOT NULL,
        head_terms TEXT NOT NULL,
        terms TEXT NOT NULL,
        UNIQUE(doc_id, idx)
    );
    CREATE VIRTUAL TABLE chunks_fts USING fts5(
        head_terms, terms, content='chunks', content_rowid='id', tokenize='ascii'
    );
    CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row');
    CREATE TABLE stats(id INTEGER PRIMARY KEY CHECK (id = 1), chunks INTEGER NOT NULL, terms INTEGER NOT NULL);
    INSERT INTO stats VALUES(1, 0, 0);
    """,
    # 2: key/value facts about the index (the analyzer version its terms were made with)
    """
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
    # 3: a counter bumped by every change to the chunks (tells derived in-memory copies they are stale)
    """
    ALTER TABLE stats ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
    """,
    # 4: index runs (jobs): a cancelled, cut-off or interrupted run is visible as such
    """
    CREATE TABLE index_jobs(
        id TEXT PRIMARY KEY,
        path TEXT NOT NULL,
        state TEXT NOT NULL,
        done INTEGER NOT NULL DEFAULT 0,
        total INTEGER NOT NULL DEFAULT 0,
        indexed INTEGER NOT NULL DEFAULT 0,
        unchanged INTEGER NOT NULL DEFAULT 0,
        failed INTEGER NOT NULL DEFAULT 0,
        removed INTEGER NOT NULL DEFAULT 0,
        chunks_added INTEGER NOT NULL DEFAULT 0,
        error TEXT NOT NULL DEFAULT '',
        started_at REAL NOT NULL,
        finished_at REAL
    );
    CREATE INDEX index_jobs_started ON index_jobs(started_at);
    """,
    # 5: chunk vectors of the optional hybrid mode (int8 + scale; see indexing.vectors), removed with their chunk
    """
    CREATE TABLE chunk_vectors(
        chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
        vec BLOB NOT NULL,
        scale REAL NOT NULL
    );
    """,
    # 6: the random id naming this database's saved postings (`indexing.postings`), made once here
    """
    INSERT OR IGNORE INTO meta(key, value) VALUES('postings_id', lower(hex(randomblob(8))));
    """,
    # 7: the documents each generation changed (`indexing.changelog`: deltas beside the in-memory postings)
    """
    CREATE TABLE index_changes(generation INTEGER NOT NULL, doc_id INTEGER NOT NULL);
    CREATE INDEX index_changes_generation ON index_changes(generation);
    """,
]
