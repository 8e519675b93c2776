"""The index's tables in PostgreSQL: the same tables as `indexing.sqlite_schema.MIGRATIONS` (SQLite), with a
`tsvector` column and GIN index instead of FTS5, and `term_stats` instead of FTS5's vocabulary.
Paths sort as bytes (COLLATE "C"), as SQLite's do, so a folder's paths are one range."""

from __future__ import annotations

from foundation.storage import Schema
from indexing.sqlite_schema import MIGRATIONS as SQLITE_MIGRATIONS
from indexing.sqlite_schema import PRAGMAS

POSTGRES_MIGRATIONS: tuple[str, ...] = (
    # 1: the whole schema of SQLite's migrations 1-5
    """
    CREATE TABLE documents(
        id bigint PRIMARY KEY,
        hash text NOT NULL UNIQUE,
        kind text NOT NULL,
        chars bigint NOT NULL,
        n_chunks bigint NOT NULL,
        warnings text NOT NULL DEFAULT '',
        created_at double precision NOT NULL
    );
    CREATE TABLE files(
        path text COLLATE "C" PRIMARY KEY,
        doc_id bigint REFERENCES documents(id),
        size bigint NOT NULL,
        mtime_ns bigint NOT NULL,
        indexed_at double precision NOT NULL,
        error text
    );
    CREATE INDEX files_doc ON files(doc_id);
    CREATE TABLE chunks(
        id bigint PRIMARY KEY,
        doc_id bigint NOT NULL REFERENCES documents(id),
        idx integer NOT NULL,
        start bigint NOT NULL,
        "end" bigint NOT NULL,
        heading text NOT NULL DEFAULT '',
        page integer, slide integer, sheet text, row_first bigint, row_last bigint,
        text text NOT NULL,
        head_terms text NOT NULL,
        terms text NOT NULL,
        tsv tsvector NOT NULL,
        UNIQUE(doc_id, idx)
    );
    CREATE INDEX chunks_tsv ON chunks USING gin(tsv);
    CREATE TABLE term_stats(term text PRIMARY KEY, df bigint NOT NULL);
    CREATE TABLE stats(
        id integer PRIMARY KEY CHECK (id = 1),
        chunks bigint NOT NULL,
        terms bigint NOT NULL,
        generation bigint NOT NULL DEFAULT 0
    );
    INSERT INTO stats VALUES(1, 0, 0, 0);
    CREATE TABLE meta(key text PRIMARY KEY, value text NOT NULL);
    CREATE TABLE index_jobs(
        id text PRIMARY KEY,
        path text NOT NULL,
        state text NOT NULL,
        done bigint NOT NULL DEFAULT 0,
        total bigint NOT NULL DEFAULT 0,
        indexed bigint NOT NULL DEFAULT 0,
        unchanged bigint NOT NULL DEFAULT 0,
        failed bigint NOT NULL DEFAULT 0,
        removed bigint NOT NULL DEFAULT 0,
        chunks_added bigint NOT NULL DEFAULT 0,
        error text NOT NULL DEFAULT '',
        started_at double precision NOT NULL,
        finished_at double precision
    );
    CREATE INDEX index_jobs_started ON index_jobs(started_at);
    CREATE TABLE chunk_vectors(
        chunk_id bigint PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
        vec bytea NOT NULL,
        scale double precision NOT NULL
    );
    """,
    # 2: SQLite's 6 (the random id naming this database's saved postings)
    """
    INSERT INTO meta(key, value) VALUES('postings_id', substr(md5(random()::text || clock_timestamp()::text), 1, 16))
    ON CONFLICT (key) DO NOTHING;
    """,
    # 3: SQLite's 7 (the documents each generation changed)
    """
    CREATE TABLE index_changes(generation bigint NOT NULL, doc_id bigint NOT NULL);
    CREATE INDEX index_changes_generation ON index_changes(generation);
    """,
)

SCHEMA = Schema(name="index", sqlite_file="index.sqlite3", sqlite=tuple(SQLITE_MIGRATIONS),
                postgres=POSTGRES_MIGRATIONS, sqlite_pragmas=PRAGMAS)
