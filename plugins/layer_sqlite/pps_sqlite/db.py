"""One SQLite writer connection per entity, used from one worker thread, and a few reader connections on threads
of their own (WAL, busy timeout): a search never waits behind a write, nor one layer's search behind another's."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field

from pps_core import PluginSettings, StorePath, Unavailable
from pps_core.catalog import MAX_DEPTH

from .schema import MIGRATIONS, migrate

T = TypeVar("T")

#: Reader connections (and threads) per database: WAL lets them read while the writer writes; a recall's turn and
#: summary searches, a startup package and health run on them at once.
READERS = 2
#: A write done on the event loop's thread (:meth:`Database.write`) never checkpoints the WAL there (the copy into
#: the database and its fsync); after this many of them one passive checkpoint runs on a connection and thread of
#: its own instead (the writer goes on meanwhile), about as often as SQLite's own (1,000 pages) with a turn's few
#: pages per write.
CHECKPOINT_EVERY = 100

log = logging.getLogger("pps.sqlite")


def _busy(exc: BaseException) -> bool:
    """SQLITE_BUSY (any extended code): another connection holds the write lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.OperationalError) and code is not None and code & 0xFF == sqlite3.SQLITE_BUSY


class SQLiteSettings(PluginSettings, env_prefix="PPS_SQLITE_"):
    file: StorePath = Field("pps.db", description="database file under the entity's home")
    busy_timeout_ms: int = Field(10_000, ge=0, description="how long a writer waits for another writer")
    ann_threshold: int = Field(50_000, ge=1, description="turns past which turn vectors are searched through an "
                                                         "HNSW index on disk instead of exactly in memory")
    ann_dtype: Literal["f16", "i8"] = Field(
        "f16", description="how the HNSW index holds turn vectors: f16 (candidates rescored from its memory; "
                           "~0.9 KB a turn) or i8 (half the memory, ~3x faster to build; candidates rescored "
                           "from SQLite's float32 rows). Changing it rebuilds the index beside")


def connect(path: Path, busy_timeout_ms: int = 10_000) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


class Database:
    """Runs every write (and whatever needs the writer's state) on one worker thread (:meth:`run`), and reads on
    :data:`READERS` threads with a connection each (:meth:`read`), so the event loop never blocks on a lock and
    reads never wait for a write. A reader sees every write acknowledged before it started (WAL)."""

    def __init__(self, path: Path, busy_timeout_ms: int = 10_000, readers: int = READERS) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"pps-sqlite-{path.parent.name}")
        self.readers = max(1, readers)
        self._readers = ThreadPoolExecutor(max_workers=self.readers,
                                           thread_name_prefix=f"pps-sqlite-read-{path.parent.name}")
        #: Reader connections not in use (as many as reader threads: a read never waits for one).
        self._idle: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._reader_conns: list[sqlite3.Connection] = []
        self.conn: sqlite3.Connection | None = None
        self.version = 0
        self._identity: tuple[int, int] | None = None
        #: Opened by :meth:`open_readonly` (a glance).
        self.readonly = False
        #: Held while the writer connection runs a statement (on the writer thread, or inline: :meth:`write`).
        self._writer = threading.Lock()
        #: Jobs given to the writer thread and not finished (an inline write waits for none of them to be queued).
        self._queued = 0
        self._queued_lock = threading.Lock()
        #: The writer connection's mode: "inline" (no busy wait, no checkpoint) or "thread" (as configured).
        self._mode = "thread"
        self._inline_writes = 0
        self._autocheckpoint = 1000  # SQLite's default; read from the connection as it opens
        self._checkpoints: set[asyncio.Future[None]] = set()
        #: Checkpoints after inline writes: a thread and connection of their own (:meth:`_checkpoint`).
        self._ckpt_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"pps-sqlite-ckpt-{path.parent.name}")
        self._ckpt_conn: sqlite3.Connection | None = None

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        new = not self.path.exists()
        self.conn = connect(self.path, self.busy_timeout_ms)
        if new:
            self.path.chmod(0o600)
        self.version = migrate(self.conn)
        self._autocheckpoint = int(self.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        st = os.stat(self.path)
        self._identity = (st.st_dev, st.st_ino)
        for _ in range(self.readers):
            reader = connect(self.path, self.busy_timeout_ms)
            reader.execute("PRAGMA query_only = ON")
            self._reader_conns.append(reader)
            self._idle.put(reader)

    def check_file(self) -> None:
        """Unavailable if the file opened is no longer the one at ``path`` (deleted, or replaced by a copy).

        SQLite keeps writing into an unlinked file and acknowledges every turn, which is then gone at
        restart; one stat before each statement (about a microsecond) turns that into a 503 and a failed
        health line instead.
        """
        if self._identity is None:
            return
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise Unavailable(f"the database file {self.path} was deleted while the server ran: nothing more is "
                              "stored there; put it back or restart the server") from None
        if (st.st_dev, st.st_ino) != self._identity:
            raise Unavailable(f"the database file {self.path} was replaced while the server ran: restart the "
                              "server to use the new file (nothing was written)")

    def _checked(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            self.check_file()
            with self._writer:
                if self._mode != "thread" and self.conn is not None:
                    self._set_mode("thread")
                return fn(*args)
        finally:
            self._submit(-1)

    def _submit(self, n: int) -> None:
        with self._queued_lock:
            self._queued += n

    def _set_mode(self, mode: str) -> None:
        """The writer connection's busy wait and automatic checkpoint: none inline (the event loop's thread must
        not wait for another process's lock, nor for a checkpoint's fsync), as configured on the writer thread."""
        assert self.conn is not None
        inline = mode == "inline"
        self.conn.execute(f"PRAGMA busy_timeout = {0 if inline else int(self.busy_timeout_ms)}")
        self.conn.execute(f"PRAGMA wal_autocheckpoint = {0 if inline else self._autocheckpoint}")
        self._mode = mode

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._pool, self._open)

    def _connect_readonly(self) -> sqlite3.Connection:
        conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None,
                               check_same_thread=False, timeout=self.busy_timeout_ms / 1000)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        return conn

    def _open_readonly(self) -> None:
        if not self.path.is_file():
            raise Unavailable(f"no database at {self.path} yet")
        conn = self._connect_readonly()
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != len(MIGRATIONS):  # the owner migrates it; reading an older shape here could mislead
                raise Unavailable(f"database schema v{version}, this PPS reads v{len(MIGRATIONS)}: the owner "
                                  "migrates it as it opens")
        except BaseException:
            conn.close()
            raise
        self.conn, self.version, self.readonly = conn, version, True
        st = os.stat(self.path)
        self._identity = (st.st_dev, st.st_ino)
        for _ in range(self.readers):  # the readers read-only too
            reader = self._connect_readonly()
            self._reader_conns.append(reader)
            self._idle.put(reader)

    async def open_readonly(self) -> None:
        """Open for reading only (``mode=ro``: no schema change, no write can succeed), beside the process that
        owns the file (WAL admits readers while it writes): a glance (``pps_core.Layer.glance``)."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._pool, self._open_readonly)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        self._submit(1)
        try:
            job = loop.run_in_executor(self._pool, self._checked, fn, *args)
        except BaseException:  # not queued (the pool is shut down): it will never run
            self._submit(-1)
            raise
        return await job

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, *args)`` on the writer connection: right here, on the event loop's thread, when the writer is
        idle (no job running or queued) and SQLite's write lock is free at once; else on the writer thread
        (:meth:`run`), which waits for the lock. A write costs no hop between threads when nothing contends
        (issue 26: the hop was most of a one-turn capture's cost beside a bare INSERT).

        ``fn`` must write in one transaction of its own (``with Tx(conn)``) and touch nothing but the database:
        when another connection holds the lock its ``BEGIN IMMEDIATE`` fails at once, nothing was written, and it
        runs again on the writer thread. Inline, the WAL is not checkpointed (that is an fsync); one passive
        checkpoint follows every :data:`CHECKPOINT_EVERY` inline writes, on a thread and connection of its own. After an inline write the loop
        runs its other ready tasks once (``sleep(0)``), as it did while a write waited for the thread."""
        if self.conn is None or self.readonly or not self._writer.acquire(blocking=False):
            return await self.run(fn, self.conn, *args)
        busy, done, out = False, False, None
        try:
            if self._queued or self.conn is None:
                busy = True  # a job is waiting for the writer thread: go after it, in order
            else:
                self.check_file()
                if self._mode != "inline":
                    self._set_mode("inline")
                try:
                    out = fn(self.conn, *args)
                except sqlite3.OperationalError as exc:
                    if not _busy(exc):
                        raise
                    if self.conn.in_transaction:
                        self.conn.execute("ROLLBACK")
                    busy = True
                else:
                    self._inline_writes += 1
                    if self._inline_writes >= CHECKPOINT_EVERY:
                        self._inline_writes = 0
                        self._checkpoint_later()
                    done = True
        finally:
            self._writer.release()
        if done:
            await asyncio.sleep(0)  # the loop to the others: writes in a row must not starve another request
            return out  # type: ignore[return-value]
        assert busy
        return await self.run(fn, self.conn, *args)

    def _checkpoint(self) -> None:
        """A passive checkpoint on a connection of its own (its own thread): SQLite lets it copy the WAL into the
        database while the writer goes on appending, so no write waits for it."""
        if self._ckpt_conn is None:
            self._ckpt_conn = connect(self.path, self.busy_timeout_ms)
        self._ckpt_conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _checkpoint_later(self) -> None:
        if self._checkpoints:  # one at a time
            return
        task = asyncio.wrap_future(self._ckpt_pool.submit(self._checkpoint))
        self._checkpoints.add(task)
        task.add_done_callback(self._checkpoint_done)

    def _checkpoint_done(self, task: asyncio.Future[None]) -> None:
        self._checkpoints.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("WAL checkpoint failed: %s", task.exception())

    def connections(self) -> list[sqlite3.Connection]:
        """The writer's connection and every reader's (tests trace or count the statements of all of them)."""
        return ([self.conn] if self.conn is not None else []) + list(self._reader_conns)

    def _read(self, fn: Callable[..., T], *args: Any) -> T:
        self.check_file()
        if self.conn is None:  # not open, or closed
            raise Unavailable(f"the database {self.path} is not open")
        conn = self._idle.get()
        try:
            conn.execute("BEGIN")  # one snapshot from its first SELECT on (a count and its page agree)
            try:
                out = fn(conn, *args)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return out
        finally:
            self._idle.put(conn)

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, *args)`` on a reader thread, in one read transaction; ``fn`` must not write."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, self._read, fn, *args)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run synchronously on the worker thread (for sync callers such as benchmarks)."""
        self._submit(1)
        try:
            job = self._pool.submit(self._checked, fn, *args)
        except BaseException:
            self._submit(-1)
            raise
        return job.result()

    async def close(self) -> None:
        def _close():
            with self._writer:
                if self.conn is not None:
                    try:
                        if not self.readonly:
                            self.conn.execute("PRAGMA optimize")
                    except sqlite3.Error:
                        pass
                    self.conn.close()
                    self.conn = None

        if self._checkpoints:  # checkpoints after inline writes run first
            await asyncio.gather(*self._checkpoints, return_exceptions=True)

        def _close_checkpointer() -> None:
            if self._ckpt_conn is not None:
                self._ckpt_conn.close()
                self._ckpt_conn = None

        if self._ckpt_conn is not None:
            await asyncio.get_running_loop().run_in_executor(self._ckpt_pool, _close_checkpointer)
        self._ckpt_pool.shutdown(wait=True)
        await asyncio.to_thread(self._readers.shutdown, True)  # reads in flight finish first
        readers, self._reader_conns = self._reader_conns, []
        for conn in readers:
            conn.close()
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, _close)
        finally:
            self._pool.shutdown(wait=True)


class Tx:
    """``with Tx(conn):`` — BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any error."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.conn.execute("COMMIT")
        else:
            self.conn.execute("ROLLBACK")


def loads(value: str | None) -> Any:
    if not value or value == "{}":  # most turns carry no metadata: no parse (the startup package reads hundreds)
        return {}
    try:
        found = json.loads(value)
    except (ValueError, RecursionError):  # a row an older version stored: the turn still reads, without it
        return {}
    return found if _shallow(found) else {}


def _shallow(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON nests at most ``limit`` deep (what the catalog accepts), so every answer can serialise it."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= limit:
                return False
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return True
