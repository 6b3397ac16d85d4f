"""The embedded graph engine seen from the serving process: the client of its engine process (:class:`EngineProcess`,
the engine itself is :mod:`pps_graphiti.engine`), the handle that recycles and revives it (:class:`KuzuHandle`), and
opening graphiti on a graph server (:func:`open_driver`). :mod:`pps_graphiti.graph` queries through them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import itertools
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")  # before graphiti_core is imported (lazily)

from pps_core.errors import Unavailable  # noqa: E402

from .records import (  # noqa: E402
    SCHEMA_QUERIES,
)
from .settings import GraphitiSettings  # noqa: E402

log = logging.getLogger("pps.graphiti")

if TYPE_CHECKING:  # pragma: no cover
    from graphiti_core.driver.driver import GraphDriver


#: How long opening waits for the file's lock, held by the last owner's engine while it ends.
LOCK_WAIT_S = 15.0
#: Set while the graph builds its indexes (at open, after a restart): those queries may take this many times
#: ``[graphiti] engine_timeout_s`` (a full-text index over a large graph is built from every fact).
_PATIENT: contextvars.ContextVar[bool] = contextvars.ContextVar("pps_graph_patient", default=False)
PATIENT_FACTOR = 10


class EngineStopped(Unavailable):
    """The graph's engine process ended during a call (a native crash, a kill): this call is abandoned (503); the
    next one starts a fresh engine on the same file."""


class EngineProcess:
    """The client of one engine process (:mod:`pps_graphiti.engine`): requests with ids over a socket, answered
    on a reader thread, so queries from several tasks are under way at once."""

    def __init__(self, module: str, path: Path, label: str, buffer_pool: int = 0) -> None:
        self.module, self.path, self.label, self.buffer_pool = module, path, label, buffer_pool
        self.proc: subprocess.Popen[bytes] | None = None
        self._conn: Any = None
        self._send = threading.Lock()
        self._pending: dict[int, concurrent.futures.Future[Any]] = {}
        self._ids = itertools.count(1)
        #: The engine's resident memory after its last answer (bytes).
        self.rss = 0
        #: Engine processes started (1 for the first); a restart after a crash or a recycle adds one.
        self.generation = 0
        #: Why the last engine ended unasked (until one answers again).
        self.fault: str | None = None
        #: Seconds a query may go unanswered before the engine counts as hung (0: wait for ever).
        self.timeout = 0.0

    @property
    def alive(self) -> bool:
        return self.proc is not None and self._conn is not None and self.proc.poll() is None

    def start(self) -> bool:
        """Start an engine and open the database; answers whether a WAL was replayed."""
        import socket
        from multiprocessing.connection import Connection

        self.stop()
        ours, theirs = socket.socketpair()
        try:
            # -P: the working directory stays off sys.path (a project's folder must not shadow a module here).
            self.proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "pps_graphiti.engine", str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=2, close_fds=True,
                cwd=self.path.parent)  # stdout may be a stdio MCP session's: the engine's goes to stderr
        finally:
            theirs.close()
        self._conn = Connection(ours.detach())
        self.generation += 1
        threading.Thread(target=self._read, args=(self._conn, self.proc), daemon=True,
                         name=f"pps-graph-engine-{self.label}").start()
        deadline = time.monotonic() + LOCK_WAIT_S
        # Opening may replay a WAL (as building indexes, patient): an engine hung opening it (in a native call) is
        # stopped like a hung query, so the call answers 503 and the next call starts another.
        limit = self.timeout * PATIENT_FACTOR or None
        while True:
            try:
                opening = self.call("open", self.module, str(self.path), SCHEMA_QUERIES, self.buffer_pool)
                try:
                    replayed = bool(opening.result(timeout=limit))
                except concurrent.futures.TimeoutError:
                    self.fault = (f"the graph engine did not open the graph within {limit:g} s ([graphiti] "
                                  "engine_timeout_s); it was stopped and starts again on the next call")
                    log.warning("graph engine of %s: %s", self.label, self.fault)
                    self.stop(kill=True)
                    raise EngineStopped(f"rich_texture: {self.fault}") from None
                break
            except RuntimeError as exc:  # the last owner's engine is still ending (it exits with its server)
                if "Could not set lock" not in str(exc) or time.monotonic() > deadline:
                    self.stop(kill=True)
                    raise
                time.sleep(0.1)
        self.fault = None
        return replayed

    def _read(self, conn: Any, proc: subprocess.Popen[bytes]) -> None:
        while True:
            try:
                rid, ok, value, rss = conn.recv()
            except (EOFError, OSError):
                break
            self.rss = rss
            fut = self._pending.pop(rid, None)
            if fut is not None and not fut.done():
                if ok:
                    fut.set_result(value)
                else:
                    fut.set_exception(value)
        code = proc.wait()
        if conn is self._conn:
            self._conn = None
            if self._pending and self.fault is None:  # (a hung engine was stopped saying why: kept)
                how = f"signal {-code}" if code < 0 else f"exit {code}"
                self.fault = (f"the graph engine stopped ({how}) during a call; it restarts on the next call")
        for rid in list(self._pending):
            fut = self._pending.pop(rid, None)
            if fut is not None and not fut.done():
                fut.set_exception(EngineStopped(f"rich_texture: {self.fault or 'the graph engine stopped'}"))

    def call(self, op: str, *args: Any) -> concurrent.futures.Future[Any]:
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        conn = self._conn
        if conn is None or not self.alive:
            fut.set_exception(EngineStopped(f"rich_texture: {self.fault or 'the graph engine is not running'}"))
            return fut
        rid = next(self._ids)
        self._pending[rid] = fut
        try:
            with self._send:
                conn.send((rid, op, args))
        except (OSError, ValueError) as exc:
            self._pending.pop(rid, None)
            fut.set_exception(EngineStopped(f"rich_texture: the graph engine is not answering ({exc})"))
        return fut

    def hung(self, waited: float) -> None:
        """A call went unanswered for ``waited`` seconds: the engine is stuck (in a native call, or stopped), so it
        is killed (every call under way then fails with :class:`EngineStopped`, saying why) and the next call
        starts a fresh one on the same file."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        self.fault = (f"the graph engine did not answer within {waited:g} s ([graphiti] engine_timeout_s); it was "
                      "stopped and restarts on the next call")
        log.warning("graph engine of %s: %s", self.label, self.fault)
        proc.kill()  # a SIGKILL ends a stopped process too
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)  # reaped: no longer alive, so the next call revives it

    def close(self) -> None:
        """Close the database (which checkpoints its WAL into the file) and end the process."""
        if self.alive:
            try:
                self.call("close").result(timeout=600)
            except Exception as exc:  # noqa: BLE001 - the WAL keeps what the file lacks
                log.warning("closing the graph engine failed: %s", exc)
        self.stop()

    def stop(self, kill: bool = False) -> None:
        proc, conn, self.proc, self._conn = self.proc, self._conn, None, None
        if conn is not None:  # the engine ends at the EOF
            with contextlib.suppress(OSError):
                conn.close()
            conn = None
        if proc is not None:
            if kill:
                proc.kill()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()


class KuzuHandle:
    """The embedded graph as this plugin opens it: an engine process of its own (:class:`EngineProcess`, Kuzu or
    LadybugDB), behind a :class:`QueryGate`. graphiti's driver (built only when something writes through graphiti)
    shares them."""

    def __init__(self, path: Path, module: str = "kuzu", max_rss_mb: int = 0, buffer_pool_mb: int = 0,
                 timeout_s: float = 0.0) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = path
        self.module = module
        #: Whether the engine has the full-text extension built in (Kuzu does; LadybugDB downloads it).
        self.fts = module == "kuzu"
        self.max_rss = max_rss_mb * 1024 * 1024
        self.engine = EngineProcess(module, path, path.parent.parent.name, buffer_pool_mb * 1024 * 1024)
        self.engine.timeout = timeout_s
        #: When the engine was last recycled (monotonic): at most one recycle a ``pps_graphiti.graph.RECYCLE_MIN_S``.
        self.recycled = time.monotonic()
        #: The WAL was replayed (the last owner did not close the graph): see Graph.ensure_indexes.
        self.pps_replayed = self.engine.start()
        owner_only(path)
        self.client = self  # graphiti's KuzuDriver reads ``client``; every query comes back to ``run``
        self.db = None  # the database lives in the engine process
        self.pps_gate = QueryGate.install(self)

    async def run(self, cypher: str, params: dict[str, Any]) -> Any:
        answer = asyncio.wrap_future(self.engine.call("query", cypher, params))
        limit = self.engine.timeout * (PATIENT_FACTOR if _PATIENT.get() else 1)
        if not limit:
            return await answer
        done, _ = await asyncio.wait({answer}, timeout=limit)
        if not done:  # hung ([graphiti] engine_timeout_s): stopped, so this and every call under way answer 503
            answer.cancel()
            self.engine.hung(limit)
            raise EngineStopped(f"rich_texture: {self.engine.fault or 'the graph engine did not answer'}")
        return answer.result()

    def reopen(self) -> bool:
        """Close the database (checkpointing it) and start a fresh engine on the file (the gate is closed)."""
        self.engine.close()
        self.pps_replayed = self.engine.start()
        owner_only(self.path)
        return self.pps_replayed

    def close(self) -> None:
        self.engine.close()


def open_driver(settings: GraphitiSettings, group_id: str) -> GraphDriver:
    """graphiti's driver for a graph on a server (Neo4j, FalkorDB)."""
    if settings.driver == "neo4j":
        from graphiti_core.driver.neo4j_driver import Neo4jDriver

        return Neo4jDriver(settings.uri, settings.user, settings.password.get_secret_value())
    from graphiti_core.driver.falkordb_driver import FalkorDriver

    pw = settings.falkordb_password.get_secret_value() if settings.falkordb_password else None
    return FalkorDriver(host=settings.host, port=settings.port, password=pw, database=group_id)


class QueryGate:
    """Every query of one embedded graph passes this gate, so the database can be closed and reopened under the
    driver (``compact``): ``closed()`` waits for the queries under way and holds new ones until it ends.
    graphiti and this plugin reach Kuzu only through ``driver.execute_query``, which this replaces: each query
    copies its rows out and closes its results before it returns (Kuzu 0.11 crashes freeing a result after its
    database closed), and a query counts as under way until its thread is done, even if its caller was
    cancelled. Unlike graphiti's, a failing query is not logged with its parameters (they hold turn text)."""

    def __init__(self, driver: Any) -> None:
        self._driver = driver
        self._busy = 0
        self._closed = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._open = asyncio.Event()
        self._open.set()

    @classmethod
    def install(cls, driver: Any) -> QueryGate:
        gate = cls(driver)
        driver.execute_query = gate.execute_query  # type: ignore[method-assign]
        driver.pps_gate = gate  # type: ignore[attr-defined]
        return gate

    async def execute_query(self, cypher_query_: str, **kwargs: Any):
        while self._closed:
            await self._open.wait()
        self._busy += 1
        self._idle.clear()
        task = asyncio.ensure_future(self._run(cypher_query_, kwargs))
        task.add_done_callback(self._done)
        return await asyncio.shield(task)

    def _done(self, task: asyncio.Future) -> None:
        if not task.cancelled():
            task.exception()  # retrieved here: a caller that was cancelled never will
        self._busy -= 1
        if self._busy == 0:
            self._idle.set()

    async def _run(self, cypher: str, kwargs: dict[str, Any]):
        # Kuzu answers a null parameter's missing type with an error, and a missing one as null; LadybugDB wants
        # every parameter the query names.
        nulls = getattr(self._driver, "module", "kuzu") != "kuzu"
        params = {k: v for k, v in kwargs.items() if (nulls or v is not None) and k not in ("database_", "routing_")}
        return await self._driver.run(cypher, params), None, None

    @contextlib.asynccontextmanager
    async def closed(self):
        while self._closed:  # one at a time
            await self._open.wait()
        self._closed = True
        self._open.clear()
        try:
            while self._busy:
                await self._idle.wait()
            yield
        finally:
            self._closed = False
            self._open.set()


def owner_only(path: Path) -> None:
    """The graph's files 0600 and its folder 0700, whatever the umask of the command that made them (Kuzu
    creates its WAL anew after each checkpoint, so writes call this too)."""
    for p, mode in ((path.parent, 0o700), (path, 0o600), (Path(f"{path}.wal"), 0o600)):
        try:
            if os.stat(p).st_mode & 0o777 != mode:
                os.chmod(p, mode)
        except FileNotFoundError:
            pass
