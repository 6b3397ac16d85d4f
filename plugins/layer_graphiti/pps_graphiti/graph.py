"""Opening graphiti on the configured driver, and the few provider-specific queries graphiti lacks."""

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
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")  # before graphiti_core is imported (lazily)

from pps_core.errors import Unavailable  # noqa: E402

from .records import (  # noqa: E402
    EDGE_RETURN,
    FULLTEXT_INDEXES,
    NODE_RETURN,
    SCHEMA_QUERIES,
    SIM_MIN_SCORE,
    Edge,
    Node,
    edge_from_record,
    fulltext_text,
    node_from_record,
    rrf,
)
from .settings import GraphitiSettings  # noqa: E402

log = logging.getLogger("pps.graphiti")

if TYPE_CHECKING:  # pragma: no cover
    from graphiti_core import Graphiti
    from graphiti_core.driver.driver import GraphDriver, GraphProvider


#: Set while the engine is being restarted: the restart's own queries pass, every other one waits for it.
_REVIVING: contextvars.ContextVar[bool] = contextvars.ContextVar("pps_graph_reviving", default=False)
#: At most one recycle of an engine this often (seconds): a graph whose pages alone fill the bound (a buffer pool
#: set larger than it) is then recycled now and then, not after every query.
RECYCLE_MIN_S = 60.0
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
        while True:
            try:
                replayed = bool(self.call("open", self.module, str(self.path), SCHEMA_QUERIES,
                                          self.buffer_pool).result())
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
        #: When the engine was last recycled (monotonic): at most one recycle a RECYCLE_MIN_S.
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


class Graph:
    """One entity's graph: the queries our layer needs on every provider, and graphiti (built at first use).

    On Kuzu (the embedded default) the graph opens, searches and counts on Kuzu alone, with graphiti's own
    query text and fusion (:mod:`.records`); ``graphiti`` and ``driver`` import graphiti_core (about 1.2 s of
    CPU, openai included) only when something writes through them. Neo4j and FalkorDB open graphiti's driver.

    Kuzu stores an edge as an intermediate ``RelatesToNode_`` node, so its patterns differ from
    Neo4j/FalkorDB, where RELATES_TO is a real relationship.
    """

    def __init__(self, settings: GraphitiSettings, home: Path, group_id: str, embedder, llm_settings) -> None:
        # Kuzu matches walks, not trails: an undirected two-step hop can come back to where it began,
        # hence the "m.uuid <> n.uuid" guards below.
        self.settings = settings
        self.group_id = group_id
        self.embedder = embedder
        self._llm_settings = llm_settings
        self._vectors: dict[str, list[float]] = {}
        #: "kuzu" (Kuzu's dialect: Kuzu or LadybugDB), "neo4j" or "falkordb" (graphiti's GraphProvider value).
        self.kind = "kuzu" if settings.embedded else settings.driver
        #: The engine: "kuzu", "ladybug", "neo4j" or "falkordb".
        self.engine = settings.driver
        kuzu = self.kind == "kuzu"
        self.kuzu: KuzuHandle | None = KuzuHandle((home / settings.db_file).resolve(), settings.driver,
                                                  settings.engine_max_rss_mb, settings.engine_buffer_pool_mb,
                                                  settings.engine_timeout_s) if kuzu else None
        self._revive_lock = asyncio.Lock()
        self._recycling: asyncio.Task | None = None
        self._driver: GraphDriver | None = None if kuzu else open_driver(settings, group_id)
        self._graphiti: Graphiti | None = None
        self.edge_match = ("(n:Entity)-[:RELATES_TO]->(e:RelatesToNode_)-[:RELATES_TO]->(m:Entity)" if kuzu
                           else "(n:Entity)-[e:RELATES_TO]->(m:Entity)")
        self.hop = "-[:RELATES_TO]-(:RelatesToNode_)-[:RELATES_TO]-" if kuzu else "-[:RELATES_TO]-"
        self.lower = "lower" if kuzu else "toLower"
        if kuzu:
            self.edge_return = EDGE_RETURN
        elif self.kind == "falkordb":
            from .falkor import EDGE_RETURN as FALKOR_EDGE_RETURN

            self.edge_return = FALKOR_EDGE_RETURN
        else:
            from graphiti_core.models.edges.edge_db_queries import get_entity_edge_return_query

            self.edge_return = get_entity_edge_return_query(self.provider)

    # -- graphiti, at first use -----------------------------------------------------------------

    @property
    def driver(self) -> GraphDriver:
        """graphiti's driver (on Kuzu: over this graph's own database and gate, built at first use)."""
        if self._driver is None:
            from .graphiti_driver import SharedKuzuDriver

            assert self.kuzu is not None
            self._driver = SharedKuzuDriver(self.kuzu, self.group_id)
        return self._driver

    @property
    def graphiti(self) -> Graphiti:
        """graphiti itself, for ingestion and the writes that go through its models (built at first use)."""
        if self._graphiti is None:
            from graphiti_core import Graphiti

            from .clients import PassthroughReranker, PPSEmbedder, build_llm

            self._graphiti = Graphiti(graph_driver=self.driver, llm_client=build_llm(self._llm_settings),
                                      embedder=PPSEmbedder(self.embedder), cross_encoder=PassthroughReranker())
        return self._graphiti

    @property
    def provider(self) -> GraphProvider:
        from graphiti_core.driver.driver import GraphProvider

        return GraphProvider(self.kind)

    async def embed_query(self, text: str) -> list[float]:
        """The query's vector (graphiti's embedding of a search query: newlines as spaces), cached briefly:
        a recall embeds the same context once per search scope."""
        text = text.replace("\n", " ")
        hit = self._vectors.get(text)
        if hit is None:
            hit = list((await asyncio.to_thread(self.embedder.embed, [text]))[0])
            if len(self._vectors) > 256:
                self._vectors.clear()
            self._vectors[text] = hit
        return list(hit)

    async def ensure_indexes(self) -> None:
        """Full-text indexes, idempotently. graphiti's generic build does nothing on Kuzu."""
        if self.kuzu is None:
            await self.graphiti.build_indices_and_constraints()
            return
        if not self.kuzu.fts:  # LadybugDB downloads its full-text extension at run time: lexical search is off
            return
        token = _PATIENT.set(True)  # building an index reads every fact: more than a query's timeout
        try:
            await self._ensure_fts()
        finally:
            _PATIENT.reset(token)

    async def _ensure_fts(self) -> None:
        assert self.kuzu is not None
        rows = await self.query("CALL SHOW_INDEXES() RETURN table_name, index_name")
        if self.kuzu.pps_replayed:
            # Kuzu 0.11 replays a WAL without its full-text index changes' consistency: the first delete of
            # an indexed node then crashes the process (SIGSEGV). Built again, they match the tables.
            for r in rows:
                await self.query(f"CALL DROP_FTS_INDEX('{r['table_name']}', '{r['index_name']}')")
            rows = []
        have = {r["index_name"] for r in rows}
        for stmt in FULLTEXT_INDEXES:
            name = stmt.split("'")[3]
            if name not in have:
                await self.query(stmt)

    async def close(self) -> None:
        if self.kuzu is not None:
            # The file lock must go now (reopen, tests). The gate has closed every query's results, and waits
            # here for the queries still running in their threads.
            if self._recycling is not None:
                with contextlib.suppress(BaseException):
                    await self._recycling
            async with self.kuzu.pps_gate.closed():
                await asyncio.to_thread(self.kuzu.close)
        elif self._driver is not None:
            await self._driver.close()

    async def query(self, cypher: str, **params: Any) -> list[dict[str, Any]]:
        if self.kuzu is not None:
            if (not self.kuzu.engine.alive or self._revive_lock.locked()) and not _REVIVING.get():
                await self.revive()
            records, header, _ = await self.kuzu.pps_gate.execute_query(cypher, **params)
            if (self.kuzu.max_rss and self.kuzu.engine.rss > self.kuzu.max_rss and self._recycling is None
                    and time.monotonic() - self.kuzu.recycled >= RECYCLE_MIN_S):
                self._recycling = asyncio.get_running_loop().create_task(self.recycle(), name="pps-graph-recycle")
        else:
            records, header, _ = await self.driver.execute_query(cypher, **params)
        if self.kind == "falkordb" and header and records and not isinstance(records[0], dict):
            records = [dict(zip(header, row, strict=True)) for row in records]
        return list(records or [])

    async def revive(self) -> None:
        """A fresh engine after the last one ended unasked (a native crash, a kill): it opens the same file,
        replaying its WAL (every acknowledged write), and the full-text indexes are built again."""
        assert self.kuzu is not None
        async with self._revive_lock:  # queries arriving meanwhile wait here until the indexes are back
            if self.kuzu.engine.alive:
                return
            token = _REVIVING.set(True)
            try:
                async with self.kuzu.pps_gate.closed():
                    why = self.kuzu.engine.fault
                    await asyncio.to_thread(self.kuzu.reopen)
                log.warning("graph engine restarted (%s)", why or "it had stopped")
                await self.ensure_indexes()
            finally:
                _REVIVING.reset(token)

    async def recycle(self) -> None:
        """The engine closed and started afresh (between queries): its memory grew past the bound."""
        assert self.kuzu is not None
        token = _REVIVING.set(True)
        try:
            async with self._revive_lock:
                rss = self.kuzu.engine.rss
                self.kuzu.recycled = time.monotonic()
                async with self.kuzu.pps_gate.closed():
                    await asyncio.to_thread(self.kuzu.reopen)
                log.info("graph engine recycled at %.0f MiB", rss / 2**20)
                if self.kuzu.pps_replayed:  # closed cleanly, its indexes are whole (it replays nothing)
                    await self.ensure_indexes()
        except Exception as exc:  # the next query starts one
            log.warning("recycling the graph engine failed: %s", exc)
        finally:
            _REVIVING.reset(token)
            self._recycling = None

    # -- reads ----------------------------------------------------------------------------------

    def parse_edge(self, record: dict[str, Any]) -> Edge:
        """A fact read back: our :class:`~.records.Edge` on Kuzu, graphiti's ``EntityEdge`` on a server (the
        same attribute names)."""
        if self.kuzu is not None:
            return edge_from_record(record)
        from graphiti_core.edges import get_entity_edge_from_record

        if self.kind == "falkordb":
            from .falkor import record_attributes

            record = record_attributes(record)
        return get_entity_edge_from_record(record, self.provider)

    async def edges_where(self, where: str, order: str = "", limit: int = 100, **params: Any) -> list[
            tuple[Edge, str, str]]:
        """Edges matching a WHERE clause over e/n/m, with their subject and object names."""
        rows = await self.query(
            f"MATCH {self.edge_match} WHERE e.group_id = $group_id AND {where} "
            f"RETURN {self.edge_return}, n.name AS source_name, m.name AS target_name "
            f"{order} LIMIT $limit", group_id=self.group_id, limit=limit, **params)
        return [(self.parse_edge(r), r["source_name"], r["target_name"]) for r in rows]

    async def hybrid_edges(self, query: str, limit: int) -> list[Edge]:
        """Edge hybrid search: BM25 + cosine (above graphiti's 0.6), fused by RRF, the best ``limit``: what
        graphiti's ``EDGE_HYBRID_SEARCH_RRF`` answers.

        On Kuzu, graphiti's cosine query joins both endpoints and DISTINCTs every edge before
        scoring (about 90 ms at 2,000 facts); scoring the fact nodes alone and joining only the
        winners gives the same candidates in about 10 ms. Neo4j uses graphiti unchanged.
        """
        if self.kind == "falkordb":
            from .falkor import hybrid_edges

            return await hybrid_edges(self, query, limit)
        if self.kuzu is None:
            from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF

            config = EDGE_HYBRID_SEARCH_RRF.model_copy(deep=True)  # recipes are shared module objects
            config.limit = limit
            return (await self.graphiti.search_(query, config=config, group_ids=[self.group_id])).edges
        n = 2 * limit
        vector = await self.embed_query(query)
        text = fulltext_text(query)

        async def bm25() -> list[dict[str, Any]]:
            if not text or not self.kuzu.fts:  # LadybugDB without its full-text extension: cosine only
                return []
            return await self.query(
                "CALL QUERY_FTS_INDEX('RelatesToNode_', 'edge_name_and_fact', cast($query AS STRING), TOP := $limit) "
                "YIELD node, score "
                "MATCH (n:Entity)-[:RELATES_TO]->(e:RelatesToNode_ {uuid: node.uuid})-[:RELATES_TO]->(m:Entity) "
                f"WHERE e.group_id IN $group_ids WITH e, score, n, m RETURN {EDGE_RETURN} ORDER BY score DESC "
                "LIMIT $limit", query=text, limit=n, group_ids=[self.group_id])

        lexical, cosine = await asyncio.gather(bm25(), self.query(
            f"MATCH (e:RelatesToNode_) WHERE e.group_id = $group_id "
            f"WITH e, array_cosine_similarity(e.fact_embedding, CAST($vector AS FLOAT[{len(vector)}])) "
            "AS score WHERE score > $min_score RETURN e.uuid AS uuid ORDER BY score DESC LIMIT $limit",
            group_id=self.group_id, vector=vector, min_score=SIM_MIN_SCORE, limit=n))
        bm25_edges = [edge_from_record(r) for r in lexical]
        by_uuid = {e.uuid: e for e in bm25_edges}
        ranked = rrf([[e.uuid for e in bm25_edges], [r["uuid"] for r in cosine]])[:limit]
        missing = [u for u in ranked if u not in by_uuid]
        if missing:
            for edge, _s, _t in await self.edges_where("e.uuid IN $uuids", limit=len(missing), uuids=missing):
                by_uuid[edge.uuid] = edge
        return [by_uuid[u] for u in ranked if u in by_uuid]

    async def hybrid_nodes(self, query: str, limit: int) -> list[Node]:
        """Entity nodes by hybrid search (BM25 over names and summaries + cosine over name embeddings above
        0.6, RRF), the best ``limit``: what graphiti's ``NODE_HYBRID_SEARCH_RRF`` answers."""
        if self.kind == "falkordb":
            from .falkor import hybrid_nodes

            return await hybrid_nodes(self, query, limit)
        if self.kuzu is None:
            from graphiti_core.search.search_config_recipes import NODE_HYBRID_SEARCH_RRF

            config = NODE_HYBRID_SEARCH_RRF.model_copy(deep=True)
            config.limit = limit
            return (await self.graphiti.search_(query, config=config, group_ids=[self.group_id])).nodes
        if not query.strip():  # graphiti's search answers nothing
            return []
        n = 2 * limit
        vector = await self.embed_query(query)
        text = fulltext_text(query)

        async def bm25() -> list[dict[str, Any]]:
            if not text or not self.kuzu.fts:  # LadybugDB without its full-text extension: cosine only
                return []
            return await self.query(
                "CALL QUERY_FTS_INDEX('Entity', 'node_name_and_summary', $query, TOP := $limit) "
                f"WITH node AS n, score WHERE n.group_id IN $group_ids WITH n, score ORDER BY score DESC "
                f"LIMIT $limit RETURN {NODE_RETURN}", query=text, limit=n, group_ids=[self.group_id])

        lexical, cosine = await asyncio.gather(bm25(), self.query(
            f"MATCH (n:Entity) WHERE n.group_id IN $group_ids "
            f"WITH n, array_cosine_similarity(n.name_embedding, CAST($vector AS FLOAT[{len(vector)}])) AS score "
            f"WHERE score > $min_score RETURN {NODE_RETURN} ORDER BY score DESC LIMIT $limit",
            group_ids=[self.group_id], vector=vector, min_score=SIM_MIN_SCORE, limit=n))
        lists = [[node_from_record(r) for r in rows] for rows in (lexical, cosine)]
        by_uuid = {node.uuid: node for found in lists for node in found}
        return [by_uuid[u] for u in rrf([[node.uuid for node in found] for found in lists])[:limit]]

    async def edges_naming(self, text: str, limit: int = 50) -> list[Edge]:
        """Edges whose subject or object name occurs in ``text`` (case-insensitive substring; the
        caller checks word boundaries). Names shorter than 3 characters are ignored."""
        low = text.casefold()
        found = await self.edges_where(
            f"((size(n.name) >= 3 AND $text CONTAINS {self.lower}(n.name)) OR "
            f"(size(m.name) >= 3 AND $text CONTAINS {self.lower}(m.name)))", limit=limit, text=low)
        return [edge for edge, _s, _t in found]

    async def node_names(self, uuids: list[str]) -> dict[str, str]:
        if not uuids:
            return {}
        rows = await self.query("MATCH (n:Entity) WHERE n.uuid IN $uuids RETURN n.uuid AS uuid, n.name AS name",
                                uuids=list(set(uuids)))
        return {r["uuid"]: r["name"] for r in rows}

    async def nodes_named(self, name: str) -> list[dict[str, Any]]:
        """Entity nodes with exactly this name (case-insensitive), most connected first."""
        rows = await self.query(
            f"MATCH (n:Entity) WHERE n.group_id = $group_id AND {self.lower}(n.name) = {self.lower}($name) "
            "RETURN n.uuid AS uuid, n.name AS name, n.created_at AS created_at",
            group_id=self.group_id, name=name)
        for r in rows:
            deg = await self.query(f"MATCH (n:Entity {{uuid: $uuid}}){self.hop}(m:Entity) WHERE m.uuid <> n.uuid "
                                   "RETURN count(*) AS c", uuid=r["uuid"])
            r["degree"] = int(deg[0]["c"]) if deg else 0
        rows.sort(key=lambda r: (-r["degree"], str(r["created_at"])))
        return rows

    async def neighbours(self, uuids: list[str]) -> set[str]:
        if not uuids:
            return set()
        rows = await self.query(
            f"MATCH (a:Entity){self.hop}(b:Entity) WHERE a.uuid IN $uuids AND b.uuid <> a.uuid "
            "AND b.group_id = $group_id "
            "RETURN DISTINCT b.uuid AS uuid", uuids=list(uuids), group_id=self.group_id)
        return {r["uuid"] for r in rows}

    async def counts(self) -> dict[str, int]:
        nodes = await self.query("MATCH (n:Entity) WHERE n.group_id = $group_id RETURN count(n) AS c",
                                 group_id=self.group_id)
        edges = await self.query(f"MATCH {self.edge_match} WHERE e.group_id = $group_id RETURN count(e) AS c",
                                 group_id=self.group_id)
        episodes = await self.query("MATCH (n:Episodic) WHERE n.group_id = $group_id RETURN count(n) AS c",
                                    group_id=self.group_id)
        return {"entities": int(nodes[0]["c"]) if nodes else 0, "facts": int(edges[0]["c"]) if edges else 0,
                "episodes": int(episodes[0]["c"]) if episodes else 0}

    async def entities_by_facts(self, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        """Entities with how many facts touch each, the most connected first (then by name).

        No ``SKIP`` reaches the engine: Kuzu 0.11.3 (and LadybugDB 0.22.0) segfault on some SKIP values past the
        end of the rows, which took the whole process down. The engine sorts and keeps the first
        ``offset + limit`` rows (bounded by the operation's parameters), and the page is cut here."""
        rows = await self.query(
            f"MATCH (n:Entity) WHERE n.group_id = $group_id OPTIONAL MATCH (n){self.hop}(m:Entity) WHERE m.uuid <> n.uuid "
            "RETURN n.uuid AS uuid, n.name AS name, count(m) AS facts ORDER BY facts DESC, name "
            "LIMIT $limit", group_id=self.group_id, limit=offset + limit)
        return [{"uuid": r["uuid"], "name": r["name"], "facts": int(r["facts"])} for r in rows[offset:offset + limit]]

    async def facts_touching(self, node_uuid: str) -> list[str]:
        """The facts (texts) of the edges an entity is the subject or object of, oldest first."""
        pattern = ("(n:Entity {uuid: $uuid})-[:RELATES_TO]-(e:RelatesToNode_)" if self.kuzu is not None
                   else "(n:Entity {uuid: $uuid})-[e:RELATES_TO]-(:Entity)")
        rows = await self.query(f"MATCH {pattern} WHERE e.name <> $dup RETURN DISTINCT e.uuid AS uuid, "
                                "e.fact AS fact, e.created_at AS created_at", uuid=node_uuid, dup="IS_DUPLICATE_OF")
        rows.sort(key=lambda r: (str(r["created_at"]), r["uuid"]))
        return [r["fact"] for r in rows if r["fact"]]

    async def mentioning_episodes(self, node_uuid: str) -> list[str]:
        rows = await self.query("MATCH (ep:Episodic)-[:MENTIONS]->(n:Entity {uuid: $uuid}) RETURN ep.uuid AS uuid",
                                uuid=node_uuid)
        return [r["uuid"] for r in rows]


def as_utc(value: datetime | None) -> datetime | None:
    """Kuzu hands timestamps back naive (they are UTC); Neo4j may hand back its own DateTime."""
    if value is None:
        return None
    if hasattr(value, "to_native"):
        value = value.to_native()
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
