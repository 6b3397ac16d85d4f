"""Word-photos in PostgreSQL (``[chroma] store = "postgres"``): every server of an entity shares them.

Each word-photo is one row holding its whole markdown (front matter and body, exactly what the file would hold),
its vectors in pgvector columns (one per piece, as the Chroma index has them) and the embedder that made them.
Search ranks by cosine distance in SQL (``<=>``), so no server holds the vectors and one server's save is found
by every other at once. Names are made as the files' are (``slug.md``, ``slug-2.md``: a unique key, never
overwriting). A deleted word-photo is kept in ``word_photos_deleted`` (as ``.deleted/`` keeps files), and
``forget=true`` removes it and every kept copy of that name. Rows whose vectors another embedder made are
embedded again when the layer opens and by ``pps reindex``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from pps_core import Layer, LayerHealth, Pointer, SearchResult, SectionConfig, StartupItems
from pps_core.errors import ConfigError, Conflict, NotFound, Unavailable
from pps_core.timeutil import now_utc

from .files import Photo, check_filename, check_title, chunks, photo_from_bytes, render, slugify
from .settings import ChromaSettings

MIGRATIONS = [
    """
    CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public;
    CREATE TABLE word_photos (
        filename text PRIMARY KEY,
        content text NOT NULL,
        embedder text NOT NULL DEFAULT '',
        created_at timestamptz NOT NULL DEFAULT now(),
        modified_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE word_photo_vectors (
        filename text NOT NULL REFERENCES word_photos(filename) ON DELETE CASCADE,
        piece integer NOT NULL,
        embedding public.vector NOT NULL,
        PRIMARY KEY (filename, piece)
    );
    CREATE TABLE word_photos_deleted (
        id bigserial PRIMARY KEY,
        filename text NOT NULL,
        content text NOT NULL,
        deleted_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX idx_word_photos_deleted_name ON word_photos_deleted(filename);
    """,
    # 2: no planner statistics of a word-photo's text, name or vectors: ANALYZE (autovacuum's) copied sampled values
    # into pg_statistic, where a forgotten word-photo's words stayed (docs/PRIVACY.md)
    """
    ALTER TABLE word_photos ALTER COLUMN filename SET STATISTICS 0, ALTER COLUMN content SET STATISTICS 0;
    ALTER TABLE word_photo_vectors ALTER COLUMN filename SET STATISTICS 0, ALTER COLUMN embedding SET STATISTICS 0;
    ALTER TABLE word_photos_deleted ALTER COLUMN filename SET STATISTICS 0, ALTER COLUMN content SET STATISTICS 0;
    DO $$
    DECLARE r record;
    BEGIN  -- what an ANALYZE stored before: a column altered to its own type loses it (no rewrite)
        FOR r IN SELECT s.tablename, s.attname, format_type(a.atttypid, a.atttypmod) AS type FROM pg_stats s
                 JOIN pg_attribute a ON a.attrelid = format('%I.%I', s.schemaname, s.tablename)::regclass
                                    AND a.attname = s.attname
                 WHERE s.schemaname = current_schema() AND (s.tablename, s.attname) IN (('word_photos', 'filename'), ('word_photos', 'content'), ('word_photo_vectors', 'filename'), ('word_photo_vectors', 'embedding'), ('word_photos_deleted', 'filename'), ('word_photos_deleted', 'content'))
                   AND (s.most_common_vals IS NOT NULL OR s.histogram_bounds IS NOT NULL)
        LOOP
            EXECUTE format('ALTER TABLE %I ALTER COLUMN %I TYPE %s', r.tablename, r.attname, r.type);
        END LOOP;
    END $$;
    """,
]


NO_STATISTICS_VERSION = 2


def _rewrite_statistics(conn) -> None:
    """The statistics migration 2 removed are dead rows of ``pg_statistic`` whose bytes stay in its file until it
    is rewritten (``VACUUM FULL``), which only a superuser or the database's owner may do: else a warning says so."""
    refused: list[str] = []

    def notice(diag) -> None:
        if (diag.severity_nonlocalized or "") == "WARNING":
            refused.append(str(diag.message_primary or ""))

    conn.add_notice_handler(notice)
    try:
        conn.autocommit = True
        conn.execute("VACUUM FULL pg_catalog.pg_statistic")
    except Exception as exc:  # the upgrade is done all the same
        refused.append(f"{type(exc).__name__}: {exc}")
    finally:
        conn.remove_notice_handler(notice)
        conn.autocommit = False
    if refused:
        logging.getLogger("pps.chroma").warning(
            "word-photos: planner statistics removed from their tables may keep their text in pg_statistic's file "
            "until its pages are reused (%s): have a superuser or the database owner run "
            "`VACUUM FULL pg_catalog.pg_statistic` once", refused[0])


def target(cs: ChromaSettings, entity_settings) -> tuple[str, str]:
    """``(dsn, schema)``: ``[chroma] dsn``/``schema``, each defaulting to ``[postgres]``'s, the schema named as every
    layer in PostgreSQL names it (``EntitySettings.database_place``)."""
    return entity_settings.database_place("chroma", cs.dsn, cs.schema_name, "postgres")


BACKUP = "postgres/word_photos.jsonl"


def _vector(v: list[float]) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in v) + "]"


class PgAnchorLayer(Layer):
    """The word-photo layer on PostgreSQL: any number of processes share it (no owner lock, nothing in a home)."""

    name = "core_anchors"
    title = "Word-photos"
    exclusive = False
    in_postgres = True  # the operations call get/edit on it (the Chroma layer's are pps_chroma.edit's)
    min_recall_score = 0.2  # as the Chroma layer's (MiniLM: unrelated sentences 0.0-0.15)

    def __init__(self, memory) -> None:
        super().__init__()
        self.memory = memory
        self.settings: ChromaSettings = memory.settings.plugin_settings(ChromaSettings, "chroma")
        self.dsn, self.schema = target(self.settings, memory.settings)
        self.index: Any = None  # the embedder once open (operations check it, as the Chroma layer's index)
        self._conn: Any = None
        self._lock = threading.Lock()

    def default_sections(self) -> list[SectionConfig]:
        return [SectionConfig(name="Word-photos", layer=self.name, count=2, position=20)]

    def left_out_call(self, section: SectionConfig, shown: int, total: int) -> Pointer | None:
        return Pointer(operation="anchor_list", params={})

    # -- connection -----------------------------------------------------------------------------

    def _connect(self):
        import psycopg
        from psycopg import sql

        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        try:
            conn = psycopg.connect(self.dsn, connect_timeout=10)
        except psycopg.OperationalError as exc:
            raise Unavailable(f"word-photos: the database is unavailable ({exc})") from None
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('pps-word-photos-migrate'))")
            # shared by every plugin's migration, taken last: one CREATE SCHEMA at a time (pps_postgres.schema)
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('pps-create-schema'))")
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
            conn.execute(sql.SQL("SET LOCAL search_path TO {}, public").format(sql.Identifier(self.schema)))
            conn.execute("CREATE TABLE IF NOT EXISTS word_photos_schema_version (version integer NOT NULL)")
            current = conn.execute("SELECT max(version) FROM word_photos_schema_version").fetchone()[0] or 0
            if current > len(MIGRATIONS):
                raise ConfigError(f"word-photo tables v{current} are newer than this PPS (v{len(MIGRATIONS)})")
            for version in range(current + 1, len(MIGRATIONS) + 1):
                conn.execute(MIGRATIONS[version - 1])
                conn.execute("INSERT INTO word_photos_schema_version (version) VALUES (%s)", (version,))
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(self.schema)))
        conn.commit()
        if 0 < current < NO_STATISTICS_VERSION:  # statistics that held word-photo text were removed
            _rewrite_statistics(conn)
        self._conn = conn
        return conn

    def _run(self, fn, *args):
        """``fn(conn, *args)`` in one transaction, under this process's lock; a lost connection is opened again."""
        import psycopg

        with self._lock:
            for attempt in (1, 2):
                conn = self._connect()
                try:
                    with conn.transaction():
                        return fn(conn, *args)
                except psycopg.OperationalError as exc:
                    if attempt == 2 or not conn.broken:
                        raise Unavailable(f"word-photos: the database is unavailable ({exc})") from None
            raise AssertionError("unreachable")  # pragma: no cover

    def _rewrite(self, *tables: str) -> None:
        """``VACUUM FULL``: new table files without the dead rows, whose bytes (a forgotten word-photo's text and
        vectors) stay in the old ones until their pages are reused. Best effort: the forget is done either way."""
        from psycopg import sql

        with self._lock:
            try:
                conn = self._connect()
                conn.autocommit = True
                try:
                    for table in tables:
                        conn.execute(sql.SQL("VACUUM FULL {}").format(sql.Identifier(table)))
                finally:
                    conn.autocommit = False
            except Exception as exc:
                logging.getLogger("pps.chroma").warning("VACUUM FULL after a forgotten word-photo did not run: %s: %s",
                                                        type(exc).__name__, exc)

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        embedder = self.memory.embedder
        if embedder is None:
            raise RuntimeError("word-photos need an embedder: add 'embeddings' to the entity's plugins")
        stale = await asyncio.to_thread(self._run, lambda c: [r[0] for r in c.execute(
            "SELECT filename FROM word_photos WHERE embedder <> %s", (embedder.name,)).fetchall()])
        self.index = embedder
        if stale:
            await asyncio.to_thread(self._embed_again, stale)

    async def close(self) -> None:
        self.index = None
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def reindex(self, progress, full: bool = False) -> dict[str, Any]:
        names = await asyncio.to_thread(self._run, lambda c: [r[0] for r in c.execute(
            "SELECT filename FROM word_photos" + ("" if full else " WHERE embedder <> %s"),
            () if full else (self.index.name,)).fetchall()])
        return {"updated": await asyncio.to_thread(self._embed_again, names, progress), "removed": []}

    def _embed_again(self, names: list[str], progress=None) -> list[str]:
        done = []
        for i, name in enumerate(names):
            row = self._run(lambda c, n=name: c.execute("SELECT content FROM word_photos WHERE filename = %s",
                                                        (n,)).fetchone())
            if row is not None:
                vectors = self._vectors(self._photo(name, row[0]))
                self._run(self._put_vectors, name, vectors)
                done.append(name)
            if progress is not None:
                progress(i + 1, len(names))
        return done

    # -- backup ---------------------------------------------------------------------------------

    async def snapshot(self, dest) -> list[str] | None:
        """``pps backup``: every word-photo and kept deleted copy as JSON lines (vectors are derived: made again)."""
        def rows(conn):
            live = conn.execute("SELECT filename, content, created_at, modified_at FROM word_photos "
                                "ORDER BY filename").fetchall()
            gone = conn.execute("SELECT filename, content, deleted_at FROM word_photos_deleted ORDER BY id").fetchall()
            return ([{"filename": f, "content": c, "created_at": t.isoformat(), "modified_at": m.isoformat()}
                     for f, c, t, m in live]
                    + [{"deleted": True, "filename": f, "content": c, "deleted_at": t.isoformat()} for f, c, t in gone])

        out = await asyncio.to_thread(self._run, rows)
        path = Path(dest) / BACKUP
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out), encoding="utf-8")
        os.chmod(path, 0o600)
        return [BACKUP]

    async def check_restore(self, manifest: dict[str, Any]) -> None:
        """A restore told ``PPS_POSTGRES_DSN``/``_SCHEMA`` puts the word-photos there too, or refuses."""
        self.memory.settings.follows("chroma", {"dsn": self.settings.dsn, "schema": self.settings.schema_name},
                                     "postgres")

    async def after_restore(self, manifest: dict[str, Any]) -> None:
        """``pps restore``: the archive's rows go into this entity's (empty) tables and are embedded; their file is
        then removed from the home (the tables are the word-photos)."""
        path = Path(self.memory.home) / BACKUP
        if not path.is_file():
            return
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        live = [r for r in rows if not r.get("deleted")]

        def load(conn) -> bool:
            have = conn.execute("SELECT filename, content FROM word_photos ORDER BY filename").fetchall()
            if have:
                if [tuple(h) for h in have] == [(r["filename"], r["content"]) for r in live]:
                    return False  # restored onto the very tables it was taken from
                raise Conflict("word-photos: the PostgreSQL tables of this entity already hold other word-photos; "
                               "restore with another [chroma] schema (or into an empty one)")
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO word_photos (filename, content, created_at, modified_at) "
                                "VALUES (%s, %s, %s, %s)",
                                [(r["filename"], r["content"], r["created_at"], r["modified_at"]) for r in live])
                cur.executemany("INSERT INTO word_photos_deleted (filename, content, deleted_at) VALUES (%s, %s, %s)",
                                [(r["filename"], r["content"], r["deleted_at"]) for r in rows if r.get("deleted")])
            return True

        if await asyncio.to_thread(self._run, load):
            await asyncio.to_thread(self._embed_again, [r["filename"] for r in live])
        path.unlink()
        if not any(path.parent.iterdir()):
            path.parent.rmdir()

    # -- rows -----------------------------------------------------------------------------------

    def _photo(self, filename: str, content: str) -> Photo:
        return photo_from_bytes(filename, content.encode("utf-8"), self.memory.tz)

    def _vectors(self, photo: Photo) -> list[list[float]]:
        return self.index.embed(chunks(photo, self.settings.chunk_chars))

    def _put_vectors(self, conn, filename: str, vectors: list[list[float]]) -> None:
        conn.execute("DELETE FROM word_photo_vectors WHERE filename = %s", (filename,))
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO word_photo_vectors (filename, piece, embedding) VALUES (%s, %s, %s::vector)",
                            [(filename, i, _vector(v)) for i, v in enumerate(vectors)])
        conn.execute("UPDATE word_photos SET embedder = %s WHERE filename = %s", (self.index.name, filename))

    # -- writes (the operations call these in a worker thread, as the Chroma layer's) ----------------------

    def save(self, content: str, title: str, location: str | None = None,
             tags: list[str] | None = None, when: datetime | None = None) -> tuple[Photo, str | None]:
        """As the file store's: ``when`` is the date it carries (an import keeps the original's; default now)."""
        title = check_title(title)
        text = render(title, content, when or now_utc(), tags or [], location)
        stem = slugify(title)
        probe = self._photo(f"{stem}.md", text)
        vectors = self._vectors(probe)  # before the transaction: a slow embedder holds no row lock

        def insert(conn) -> str:
            for n in range(1, 10_000):
                name = f"{stem}.md" if n == 1 else f"{stem}-{n}.md"
                if conn.execute("INSERT INTO word_photos (filename, content) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                                (name, text)).rowcount:
                    self._put_vectors(conn, name, vectors)
                    return name
            raise Conflict(f"anchor_save: too many word-photos titled {title!r}", param="title")

        name = self._run(insert)
        return self._photo(name, text), None

    def get(self, filename: str) -> dict[str, Any]:
        name = check_filename(filename)
        row = self._run(lambda c: c.execute("SELECT content FROM word_photos WHERE filename = %s",
                                            (name,)).fetchone())
        if row is None:
            raise NotFound(f"anchor_get: no word-photo named {name!r}", param="filename")
        photo = self._photo(name, row[0])
        return {"filename": photo.filename, "title": photo.title, "date": photo.date, "tags": photo.tags,
                "location": photo.location, "content": photo.body, "sha256": photo.sha256,
                **({"warning": photo.warning} if photo.warning else {})}

    def edit(self, filename: str, content: str, title: str | None, tags: list[str] | None,
             location: str | None) -> tuple[dict[str, Any], str | None]:
        name = check_filename(filename)
        row = self._run(lambda c: c.execute("SELECT content FROM word_photos WHERE filename = %s",
                                            (name,)).fetchone())
        if row is None:
            raise NotFound(f"anchor_edit: no word-photo named {name!r}", param="filename")
        old = self._photo(name, row[0])
        try:
            when = datetime.fromisoformat(old.date.replace("Z", "+00:00")) if old.date else now_utc()
        except ValueError:
            when = now_utc()
        text = render(check_title(title) if title is not None else old.title, content, when,
                      tags if tags is not None else old.tags, (location if location is not None else old.location)
                      or None)
        photo = self._photo(name, text)
        vectors = self._vectors(photo)

        def update(conn) -> None:
            cur = conn.execute("UPDATE word_photos SET content = %s, modified_at = now() WHERE filename = %s "
                               "AND content = %s", (text, name, row[0]))
            if not cur.rowcount:  # edited or deleted by another server meanwhile: not overwritten blindly
                raise Conflict(f"anchor_edit: {name} changed while being edited; read it again", param="filename")
            self._put_vectors(conn, name, vectors)

        self._run(update)
        return {"edited": name, "title": photo.title, "date": photo.date, "chars": len(photo.body)}, None

    def delete(self, filename: str, forget: bool = False) -> str | None:
        name = check_filename(filename)

        def run(conn) -> str | None:
            row = conn.execute("DELETE FROM word_photos WHERE filename = %s RETURNING content", (name,)).fetchone()
            if forget:
                kept = conn.execute("DELETE FROM word_photos_deleted WHERE filename = %s", (name,)).rowcount
                if row is None and not kept:
                    raise NotFound(f"anchor_delete: no word-photo named {name!r}, nor a deleted copy of it",
                                   param="filename")
                return None
            if row is None:
                raise NotFound(f"anchor_delete: no word-photo named {name!r} (anchor_list shows them)",
                               param="filename")
            kept_id = conn.execute("INSERT INTO word_photos_deleted (filename, content) VALUES (%s, %s) RETURNING id",
                                   (name, row[0])).fetchone()[0]
            return f"{name} (word_photos_deleted id {kept_id})"

        kept = self._run(run)
        if forget:
            self._rewrite("word_photos", "word_photo_vectors", "word_photos_deleted")
        return kept

    def sync(self, rehash: bool = False, names: set[str] | None = None) -> dict[str, list]:
        """``anchor_resync``: rows embedded by another embedder are embedded again (rows are never edited behind
        the layer's back, so there is nothing else to notice)."""
        stale = self._run(lambda c: [r[0] for r in c.execute(
            "SELECT filename FROM word_photos WHERE embedder <> %s", (self.index.name,)).fetchall()])
        return {"added": [], "updated": self._embed_again(stale), "removed": [], "unreadable": []}

    # -- reads ----------------------------------------------------------------------------------

    def _rows(self, order: str, limit: int | None) -> list[tuple[str, str, Any]]:
        sql = f"SELECT filename, content, created_at FROM word_photos ORDER BY {order}"
        return self._run(lambda c: c.execute(sql + (" LIMIT %s" if limit is not None else ""),
                                             (limit,) if limit is not None else ()).fetchall())

    def _result(self, filename: str, content: str, created, score: float) -> SearchResult:
        photo = self._photo(filename, content)
        meta: dict[str, Any] = {"kind": "document", "title": photo.title}
        if photo.tags:
            meta["tags"] = photo.tags
        if photo.location:
            meta["location"] = photo.location
        from pps_core.timeutil import to_storage

        return SearchResult(layer=self.name, content=photo.body, source=filename, score=round(score, 4),
                            timestamp=photo.date or to_storage(created), metadata=meta)

    def listing(self) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
        from pps_core.timeutil import to_storage

        out = []
        for filename, content, created in self._rows("created_at DESC, filename DESC", None):
            photo = self._photo(filename, content)
            out.append({"filename": filename, "title": photo.title, "date": photo.date or to_storage(created),
                        "tags": photo.tags, "location": photo.location, "bytes": len(content.encode("utf-8")),
                        **({"warning": photo.warning} if photo.warning else {})})
        out.sort(key=lambda p: (p["date"], p["filename"]), reverse=True)
        return out, []

    def search_sync(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        if limit <= 0:
            return []
        (qv,) = self.index.embed([query])
        rows = self._run(lambda c: c.execute(
            "SELECT p.filename, p.content, p.created_at, b.distance FROM (SELECT filename, min(embedding <=> "
            "%s::vector) AS distance FROM word_photo_vectors GROUP BY filename ORDER BY distance, filename "
            "LIMIT %s OFFSET %s) b JOIN word_photos p USING (filename) ORDER BY b.distance, p.filename",
            (_vector(qv), limit, offset)).fetchall())
        return [self._result(f, c, t, 1.0 - float(d)) for f, c, t, d in rows]

    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        return await asyncio.to_thread(self.search_sync, query, limit, offset)

    async def startup(self, count: int | None) -> StartupItems:
        """The newest ``count`` word-photos (their total is not counted: a query more per startup)."""
        return StartupItems(items=await self.recent(count if count is not None else 1_000_000))

    async def recent(self, limit: int) -> list[SearchResult]:
        if limit <= 0:
            return []

        def run() -> list[SearchResult]:  # newest by when they were saved (anchor_edit keeps a photo's date)
            rows = self._rows("created_at DESC, filename DESC", limit)
            return [self._result(f, c, t, 1.0) for f, c, t in reversed(rows)]  # oldest first, as Chroma's

        return await asyncio.to_thread(run)

    async def ready(self) -> str | None:
        """``/ready``: the word-photos' database answers now (one ``SELECT 1`` on this layer's connection)."""
        try:
            await asyncio.to_thread(self._run, lambda c: c.execute("SELECT 1"))
        except Unavailable:
            return "the word-photos' PostgreSQL is unreachable; try again shortly"
        return None

    async def health(self) -> LayerHealth:
        if self.index is None:
            return LayerHealth(layer=self.name, available=False, detail="closed")

        def run() -> LayerHealth:
            count, pieces = self._run(lambda c: c.execute(
                "SELECT (SELECT count(*) FROM word_photos), (SELECT count(*) FROM word_photo_vectors)").fetchone())
            return LayerHealth(layer=self.name, available=True, latency_ms=self.recent_latency_ms,
                               detail=f"{count} word-photos in postgres schema {self.schema}; embedder "
                                      f"{self.index.name}",
                               counts={"word_photos": int(count), "chunks": int(pieces), "unreadable": 0})

        try:
            return await asyncio.to_thread(run)
        except Exception as exc:  # noqa: BLE001 - a health check reports, never raises
            return LayerHealth(layer=self.name, available=False, detail=f"{type(exc).__name__}: {exc}")

