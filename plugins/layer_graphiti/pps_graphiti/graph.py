"""Opening graphiti on the configured driver, and the few provider-specific queries graphiti lacks."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")  # before graphiti_core is imported (lazily)


from .engine_client import (  # noqa: E402
    _PATIENT,
    KuzuHandle,
    open_driver,
)
from .records import (  # noqa: E402
    EDGE_RETURN,
    FULLTEXT_INDEXES,
    NODE_RETURN,
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

#: Set while the engine is being restarted: the restart's own queries pass, every other one waits for it.
_REVIVING: contextvars.ContextVar[bool] = contextvars.ContextVar("pps_graph_reviving", default=False)
#: At most one recycle of an engine this often (seconds): a graph whose pages alone fill the bound (a buffer pool
#: set larger than it) is then recycled now and then, not after every query.
RECYCLE_MIN_S = 60.0

if TYPE_CHECKING:  # pragma: no cover
    from graphiti_core import Graphiti
    from graphiti_core.driver.driver import GraphDriver, GraphProvider


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
