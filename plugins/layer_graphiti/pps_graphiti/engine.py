"""The process that owns an entity's embedded graph (Kuzu or LadybugDB): ``python -P -m pps_graphiti.engine FD``.

A native failure of the engine (Kuzu 0.11.3 segfaults on some query shapes; it grows by about 11 KB per query
and never gives it back) ends or bloats this process, never the server: the server answers 503 for the graph,
starts a fresh engine on the same file (its WAL holds every acknowledged write) and recycles one whose memory
grew past ``[graphiti] engine_max_rss_mb`` (:class:`pps_graphiti.engine_client.EngineProcess`).

Requests are ``(id, op, args)`` over a :class:`multiprocessing.connection.Connection` on the inherited socket
``FD``; answers ``(id, ok, value, rss_bytes)``. Queries run on a few threads, each with its own connection to the
one database, so reads go on side by side as they did in the server. ``-P`` keeps the working directory off
``sys.path``; stdout goes to stderr (it may be a stdio MCP session's).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pps_core.errors import portable_exception

THREADS = 4
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0




class Engine:
    """One database and a connection per query thread."""

    def __init__(self) -> None:
        self.module: Any = None
        self.db: Any = None
        self._local = threading.local()
        self._conns: list[Any] = []
        self._lock = threading.Lock()

    def open(self, module: str, path: str, schema: str, buffer_pool: int = 0) -> bool:
        """Open (creating) the database; answers whether a WAL was replayed (the last owner did not close it).
        ``buffer_pool``: bytes of pages the engine may cache (0: the engine's default, 80% of the machine)."""
        self.module = importlib.import_module(module)
        try:
            wal = os.stat(f"{path}.wal").st_size
        except OSError:
            wal = 0
        Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.db = self.module.Database(path, buffer_pool_size=buffer_pool)
        conn = self.module.Connection(self.db)
        try:
            conn.execute(schema)
        finally:
            conn.close()
        return wal > 0

    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "db", None) is not self.db:
            conn = self.module.Connection(self.db)
            self._local.conn, self._local.db = conn, self.db
            with self._lock:
                self._conns.append(conn)
        return conn

    def query(self, cypher: str, params: dict[str, Any]) -> Any:
        results = self._conn().execute(cypher, parameters=params)
        batch = results if isinstance(results, list) else [results]
        try:
            rows = [list(r.rows_as_dict()) if r is not None else [] for r in batch]
        finally:
            for r in batch:
                if r is not None and not r.is_closed:
                    r.close()
        return rows if isinstance(results, list) else rows[0]

    def close(self) -> None:
        """Close every connection and the database (which checkpoints its WAL into the file)."""
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing goes on
                pass
        if self.db is not None:
            db, self.db = self.db, None
            db.close()

    def import_db(self, export: str, target: str, fts: bool) -> None:
        """A fresh database at ``target`` from an EXPORT DATABASE folder (tables, data and indexes)."""
        import re

        def statements(path: Path) -> list[str]:
            return [s.strip() for s in re.split(r";\s*\n", path.read_text()) if s.strip()] if path.exists() else []

        folder = Path(export)
        # Kuzu's import of its own export fails on full-text indexes (their tokenizer macros and stopword table
        # are created twice): the macros are left out and each index is made again, one statement at a time.
        schema = [s for s in statements(folder / "schema.cypher") if not re.match(r"CREATE MACRO `\w+_TOKENIZE`", s)]
        (folder / "schema.cypher").write_text("".join(s + ";\n" for s in schema))
        indexes = statements(folder / "index.cypher")
        (folder / "index.cypher").write_text("")
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        db = self.module.Database(target)
        try:
            conn = self.module.Connection(db)
            try:
                if fts:
                    try:
                        conn.execute("LOAD EXTENSION fts")
                    except RuntimeError:
                        pass
                conn.execute(f"IMPORT DATABASE '{export}'")
                for statement in indexes:
                    conn.execute(statement)
                conn.execute("CHECKPOINT")
            finally:
                conn.close()
        finally:
            db.close()

    def crash(self) -> None:  # tests: a native failure, as Kuzu's own would end the process
        os.kill(os.getpid(), signal.SIGSEGV)


def _watch_parent(parent: int) -> None:
    """End with the server, even if a native call hangs here (the socket's EOF is seen only between calls)."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(0)


def serve(fd: int, parent: int) -> None:
    from multiprocessing.connection import Connection

    os.umask(0o077)  # the entity's graph is the owner's alone
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the server, which closes the graph
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    conn = Connection(fd)
    engine = Engine()
    send_lock = threading.Lock()
    pool = ThreadPoolExecutor(THREADS, thread_name_prefix="pps-graph-engine")

    def reply(rid: int, ok: bool, value: Any) -> None:
        try:
            with send_lock:
                conn.send((rid, ok, value, rss_bytes()))
        except Exception as exc:  # noqa: BLE001 - an answer that cannot be pickled is an error all the same
            with send_lock:
                conn.send((rid, False, RuntimeError(f"{type(exc).__name__}: {exc}"), rss_bytes()))

    def run(rid: int, op: str, args: tuple) -> None:
        try:
            value = getattr(engine, op)(*args)
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller
            reply(rid, False, portable_exception(exc))
        else:
            reply(rid, True, value)

    while True:
        try:
            rid, op, args = conn.recv()
        except (EOFError, OSError):
            break
        if op == "query":
            pool.submit(run, rid, op, args)
        else:  # open, close, import_db: the server's gate holds every query meanwhile
            run(rid, op, args)
            if op == "close":
                break
    # Closed, or the server went away without closing: ended at once, like the server (a query still running is
    # cut as a kill would cut it; the WAL holds every write that was acknowledged), so the file's lock is free
    # for the next owner without waiting for a checkpoint.
    os._exit(0)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
