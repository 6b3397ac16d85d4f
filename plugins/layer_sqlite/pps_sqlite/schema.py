"""PPS owns this schema: versioned migrations, applied in order, each in one transaction."""

from __future__ import annotations

import sqlite3

CANONICAL_GLOB = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z"

MIGRATIONS: list[str] = [
    # 1: turns, summaries, FTS kept by triggers, timestamps normalised by trigger, read cursors.
    f"""
    CREATE TABLE message_summaries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        summary_text TEXT NOT NULL,
        start_id INTEGER NOT NULL,
        end_id INTEGER NOT NULL,
        message_count INTEGER NOT NULL,
        channels TEXT NOT NULL DEFAULT '[]',
        time_span_start TEXT,
        time_span_end TEXT,
        summary_type TEXT NOT NULL DEFAULT 'work',
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    );
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        message_id TEXT UNIQUE,
        content TEXT NOT NULL,
        author_name TEXT NOT NULL,
        channel TEXT NOT NULL,
        session_id TEXT,
        created_at TEXT NOT NULL,
        stored_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
        metadata TEXT NOT NULL DEFAULT '{{}}',
        summary_id INTEGER REFERENCES message_summaries(id),
        ingested_at TEXT
    );
    CREATE INDEX idx_messages_created ON messages(created_at, id);
    CREATE INDEX idx_messages_unsummarized ON messages(id) WHERE summary_id IS NULL;
    CREATE INDEX idx_messages_uningested ON messages(id) WHERE ingested_at IS NULL;
    CREATE INDEX idx_messages_channel ON messages(channel, id);
    CREATE INDEX idx_summaries_span ON message_summaries(time_span_end);

    CREATE TRIGGER messages_normalise_time AFTER INSERT ON messages
    WHEN NEW.created_at NOT GLOB '{CANONICAL_GLOB}'
    BEGIN
        UPDATE messages SET created_at = strftime('%Y-%m-%dT%H:%M:%fZ', NEW.created_at) WHERE id = NEW.id;
    END;

    CREATE VIRTUAL TABLE messages_fts USING fts5(
        content, author_name, channel, content='messages', content_rowid='id', tokenize='porter unicode61');
    CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts(rowid, content, author_name, channel)
        VALUES (NEW.id, NEW.content, NEW.author_name, NEW.channel);
    END;
    CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content, author_name, channel)
        VALUES ('delete', OLD.id, OLD.content, OLD.author_name, OLD.channel);
    END;
    CREATE TRIGGER messages_fts_au AFTER UPDATE OF content, author_name, channel ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content, author_name, channel)
        VALUES ('delete', OLD.id, OLD.content, OLD.author_name, OLD.channel);
        INSERT INTO messages_fts(rowid, content, author_name, channel)
        VALUES (NEW.id, NEW.content, NEW.author_name, NEW.channel);
    END;

    CREATE VIRTUAL TABLE summaries_fts USING fts5(
        summary_text, content='message_summaries', content_rowid='id', tokenize='porter unicode61');
    CREATE TRIGGER summaries_fts_ai AFTER INSERT ON message_summaries BEGIN
        INSERT INTO summaries_fts(rowid, summary_text) VALUES (NEW.id, NEW.summary_text);
    END;
    CREATE TRIGGER summaries_fts_ad AFTER DELETE ON message_summaries BEGIN
        INSERT INTO summaries_fts(summaries_fts, rowid, summary_text) VALUES ('delete', OLD.id, OLD.summary_text);
    END;
    CREATE TRIGGER summaries_fts_au AFTER UPDATE OF summary_text ON message_summaries BEGIN
        INSERT INTO summaries_fts(summaries_fts, rowid, summary_text) VALUES ('delete', OLD.id, OLD.summary_text);
        INSERT INTO summaries_fts(rowid, summary_text) VALUES (NEW.id, NEW.summary_text);
    END;

    CREATE TABLE read_cursors (
        consumer_key TEXT PRIMARY KEY,
        last_id INTEGER NOT NULL,
        updated_at TEXT NOT NULL
    );
    """,
    # 2: vectors for summaries and turns (filled when an embedder is loaded).
    """
    CREATE TABLE summary_vectors (
        summary_id INTEGER PRIMARY KEY REFERENCES message_summaries(id) ON DELETE CASCADE,
        model TEXT NOT NULL,
        vector BLOB NOT NULL
    );
    CREATE TABLE message_vectors (
        message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
        model TEXT NOT NULL,
        vector BLOB NOT NULL
    );
    """,
    # 3: what the startup path and search read without scanning history (issue 19): counts kept by
    # triggers (health, the startup package and ambient recall read them on every call) and the distinct
    # authors (names in a question), which were a scan of every turn.
    """
    CREATE TABLE counters (
        name TEXT PRIMARY KEY,
        n INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO counters (name, n) VALUES
        ('messages', (SELECT COUNT(*) FROM messages)),
        ('unsummarized', (SELECT COUNT(*) FROM messages WHERE summary_id IS NULL)),
        ('uningested', (SELECT COUNT(*) FROM messages WHERE ingested_at IS NULL)),
        ('summaries', (SELECT COUNT(*) FROM message_summaries));
    CREATE TRIGGER counters_messages_ai AFTER INSERT ON messages BEGIN
        UPDATE counters SET n = n + CASE name WHEN 'messages' THEN 1
            WHEN 'unsummarized' THEN NEW.summary_id IS NULL ELSE NEW.ingested_at IS NULL END
        WHERE name IN ('messages', 'unsummarized', 'uningested');
    END;
    CREATE TRIGGER counters_messages_ad AFTER DELETE ON messages BEGIN
        UPDATE counters SET n = n - CASE name WHEN 'messages' THEN 1
            WHEN 'unsummarized' THEN OLD.summary_id IS NULL ELSE OLD.ingested_at IS NULL END
        WHERE name IN ('messages', 'unsummarized', 'uningested');
    END;
    CREATE TRIGGER counters_messages_summarized AFTER UPDATE OF summary_id ON messages
    WHEN (OLD.summary_id IS NULL) != (NEW.summary_id IS NULL) BEGIN
        UPDATE counters SET n = n + (NEW.summary_id IS NULL) - (OLD.summary_id IS NULL) WHERE name = 'unsummarized';
    END;
    CREATE TRIGGER counters_messages_ingested AFTER UPDATE OF ingested_at ON messages
    WHEN (OLD.ingested_at IS NULL) != (NEW.ingested_at IS NULL) BEGIN
        UPDATE counters SET n = n + (NEW.ingested_at IS NULL) - (OLD.ingested_at IS NULL) WHERE name = 'uningested';
    END;
    CREATE TRIGGER counters_summaries_ai AFTER INSERT ON message_summaries BEGIN
        UPDATE counters SET n = n + 1 WHERE name = 'summaries';
    END;
    CREATE TRIGGER counters_summaries_ad AFTER DELETE ON message_summaries BEGIN
        UPDATE counters SET n = n - 1 WHERE name = 'summaries';
    END;

    CREATE TABLE authors (
        name TEXT PRIMARY KEY
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO authors (name) SELECT DISTINCT author_name FROM messages;
    CREATE TRIGGER authors_ai AFTER INSERT ON messages BEGIN
        INSERT OR IGNORE INTO authors (name) VALUES (NEW.author_name);
    END;
    CREATE TRIGGER authors_au AFTER UPDATE OF author_name ON messages BEGIN
        INSERT OR IGNORE INTO authors (name) VALUES (NEW.author_name);
    END;
    """,
    # 4: time order (issue 13): unsummarized turns paged by (created_at, id) from an index; summaries flagged
    # for rewrite (a backfilled turn inside their span, a forgotten turn they covered); the forget log (ids,
    # time, who; never content). Existing summaries with an unsummarized turn inside their span are flagged.
    """
    ALTER TABLE message_summaries ADD COLUMN rewrite TEXT;
    CREATE INDEX idx_messages_unsummarized_time ON messages(created_at, id) WHERE summary_id IS NULL;
    CREATE INDEX idx_messages_unsummarized_channel_time ON messages(channel, created_at, id) WHERE summary_id IS NULL;
    CREATE INDEX idx_summaries_start ON message_summaries(time_span_start);
    CREATE INDEX idx_summaries_rewrite ON message_summaries(id) WHERE rewrite IS NOT NULL;
    CREATE TABLE forget_log (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        forgotten_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
        who TEXT NOT NULL,
        how TEXT NOT NULL,
        turn_ids TEXT NOT NULL,
        summary_ids TEXT NOT NULL DEFAULT '[]'
    );
    UPDATE message_summaries SET rewrite = 'backfill' WHERE rewrite IS NULL AND EXISTS (
        SELECT 1 FROM messages m WHERE m.summary_id IS NULL
        AND m.created_at > message_summaries.time_span_start AND m.created_at < message_summaries.time_span_end);
    """,
    # 5: forgetting that holds (issue 22): tombstones of forgotten message ids (a SHA-256 digest, never the id
    # itself), so no import or hook stores a forgotten turn again; forget_search confirmations any process can
    # redeem (digests of the token and the query, the turn ids, an expiry); the forget log keeps no channel name
    # (how = 'ids' | 'range' | 'search'); authors nobody speaks as any more go.
    """
    CREATE TABLE forgotten_message_ids (digest TEXT PRIMARY KEY) WITHOUT ROWID;
    CREATE TABLE forget_tokens (
        digest TEXT PRIMARY KEY,
        query_digest TEXT NOT NULL,
        turn_ids TEXT NOT NULL,
        expires_at REAL NOT NULL
    );
    UPDATE forget_log SET how = 'range' WHERE how LIKE 'range %';
    DELETE FROM authors WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.author_name = authors.name);
    """,
    # 6: forgetting is an obligation (issue 35): the copies a forget still owes (the graph, the recap), recorded
    # with the deletion, with what their forget needs (ids, message ids, texts) until each confirms; then the row
    # goes (secure_delete: its bytes too).
    """
    CREATE TABLE owed_forgets (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        forgotten_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
        who TEXT NOT NULL,
        turn_ids TEXT NOT NULL,
        message_ids TEXT NOT NULL,
        texts TEXT NOT NULL,
        copies TEXT NOT NULL
    );
    """,
]


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database to the newest schema version; returns it. Safe to run concurrently."""
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    if current < len(MIGRATIONS):  # what a migration rewrites (a forget log's channel names) leaves no bytes behind
        conn.execute("PRAGMA secure_delete = ON")
    if current > len(MIGRATIONS):
        raise RuntimeError(f"database schema v{current} is newer than this PPS (v{len(MIGRATIONS)}); upgrade PPS")
    for version in range(current + 1, len(MIGRATIONS) + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            now = conn.execute("PRAGMA user_version").fetchone()[0]
            if now >= version:  # another process migrated meanwhile
                conn.execute("COMMIT")
                continue
            for stmt in _split(MIGRATIONS[version - 1]):
                conn.execute(stmt)
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return conn.execute("PRAGMA user_version").fetchone()[0]


def _split(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    out, buf = [], []
    for line in script.strip().splitlines():
        buf.append(line)
        joined = "\n".join(buf).strip()
        if joined.endswith(";") and sqlite3.complete_statement(joined):
            out.append(joined)
            buf = []
    if "\n".join(buf).strip():
        out.append("\n".join(buf).strip())
    return out
