"""The rich_texture layer: hybrid edge search around the focal entity, then rankers."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pps_llm.settings import llm_settings

from pps_core import IngestionQueue, Layer, LayerHealth, SearchResult
from pps_core.errors import Conflict, Unavailable
from pps_core.timeutil import to_storage

from .settings import GraphitiSettings

#: Where a backup keeps a graph server's partition (an embedded graph file, home-relative).
SERVER_EXPORT = "graphiti/server-graph.kuzu"

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Graph
    from .records import Edge, Node

log = logging.getLogger("pps.graphiti")

#: Relevance by rank in graphiti's fused (RRF) list: 1/(1 + rank/RANK_SCALE); rank 10 weighs half.
RANK_SCALE = 10.0
#: Weight by graph distance from the focal entity (0 = the fact touches it). A hop is worth about one
#: rank at the top of the list: proximity decides between near-equal matches, it does not bury the best one.
FOCAL_WEIGHTS = (1.0, 0.93, 0.87, 0.83)
UNREACHABLE = 0.8
DUPLICATE = "IS_DUPLICATE_OF"
#: A fact whose subject or object the question names (whole words, any case) outweighs look-alikes:
#: "what does Keeper7 tend?" is about Keeper7, however similar Keeper1's facts read.
MENTION_BOOST = 1.5
#: A named fact counts as at least this rank in the text search (rank 3: 0.77, x1.5 with the mention
#: boost), so it leads facts that merely read alike.
NAMED_RANK = 3


class GraphitiLayer(Layer):
    name = "rich_texture"
    title = "Rich texture"
    backlog_target = "Graphiti"

    def __init__(self, memory, rankers=(), novelty=None) -> None:
        super().__init__()
        self.memory = memory
        #: The rankers the layer applies itself when ``[rankers]`` names none for it (its plugin's own, in order).
        self.rankers = list(rankers)
        #: The novelty counts (:class:`~pps_graphiti.rankers.Novelty`): a deleted fact's count goes with it.
        self.novelty = novelty
        self.settings: GraphitiSettings = memory.settings.plugin_settings(GraphitiSettings, "graphiti")
        self.group_id = self.settings.resolved_group_id(memory.settings.entity)
        self.focal_name = self.settings.focal(memory.settings)
        self.graph: Graph | None = None
        self._focal: tuple[str | None, float] = (None, 0.0)  # uuid, expires (monotonic)
        self._distances: tuple[dict[str, int], float] | None = None
        from .guard import WriteGuard

        self.write_lock = WriteGuard(self)
        #: Why a write failed in the store (writes are then refused until a restart); None if fine.
        self.fault: str | None = None
        #: A compaction waiting for a run of deletes to end (``compact.schedule``).
        self._compact_task: asyncio.Task | None = None
        from .ingest import Ingestor

        self.ingestor = Ingestor(self)

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        embedder = self.memory.embedder
        if embedder is None:
            raise RuntimeError("rich_texture needs an embedder: add the 'embeddings' plugin to the entity's plugins")
        from . import compact
        from .graph import Graph
        from .guard import drop_orphans

        if self.settings.embedded:  # what a compaction cut short left beside the graph
            await asyncio.to_thread(compact.clean_leftovers, compact.db_path(self))
        self.graph = await asyncio.to_thread(Graph, self.settings, self.memory.home, self.group_id, embedder,
                                             llm_settings(self.memory.settings))
        try:
            await self.graph.ensure_indexes()
            if self.settings.embedded:  # one owner: nobody is half-way through a write
                await drop_orphans(self)
                if compact.pending(self):  # forgotten text may still be in the file: a forget was cut short
                    await compact.compact(self)
        except BaseException:
            await self.graph.close()
            self.graph = None
            raise

    async def ready_to_write(self) -> None:
        from .guard import ready_to_write

        await ready_to_write(self)

    async def close(self) -> None:
        await self.ingestor.stop()
        if self.novelty is not None:  # counts kept in the graph: the last batch
            await self.novelty.stop()
        if self.settings.embedded:
            from .compact import at_close

            await at_close(self)
        if self.graph is not None:
            graph, self.graph = self.graph, None
            if self.fault:  # closing checkpoints, and a graph that failed a write aborts the process there
                from .guard import keep_failed

                keep_failed(graph)
                return
            await graph.close()

    def backlog_note(self, key: str, count: int) -> str | None:
        if key != "uningested":
            return None
        from .ingest import uningested_status

        return uningested_status(count, llm_settings(self.memory.settings).configured)

    def require(self) -> Graph:
        if self.graph is None:
            raise Unavailable("rich_texture: the graph is not open")
        return self.graph

    def changed(self) -> None:
        """Forget cached graph facts after a write (distances, and a focal entity not yet found)."""
        self._distances = None
        if self._focal[0] is None:
            self._focal = (None, 0.0)

    # -- the focal entity -----------------------------------------------------------------------

    async def focal_uuid(self) -> str | None:
        uuid, expires = self._focal
        if time.monotonic() < expires:
            return uuid
        graph = self.require()
        rows = await graph.nodes_named(self.focal_name)
        uuid = rows[0]["uuid"] if rows else None
        if len(rows) > 1:
            from .writes import merge_nodes

            async with self.write_lock:
                await merge_nodes(self, uuid, [r["uuid"] for r in rows[1:]])
            log.info("merged %d duplicate nodes named %r into %s", len(rows) - 1, self.focal_name, uuid)
        self._focal = (uuid, time.monotonic() + (self.settings.focal_ttl_s if uuid else 30.0))
        return uuid

    async def distances(self) -> dict[str, int]:
        """Graph distance of each entity within ``focal_depth`` hops of the focal entity."""
        if self._distances is not None and time.monotonic() < self._distances[1]:
            return self._distances[0]
        focal = await self.focal_uuid()
        dist: dict[str, int] = {}
        if focal:
            dist[focal] = 0
            frontier = {focal}
            for depth in range(1, self.settings.focal_depth + 1):
                frontier = (await self.require().neighbours(list(frontier))) - dist.keys()
                if not frontier:
                    break
                dist.update(dict.fromkeys(frontier, depth))
        self._distances = (dist, time.monotonic() + 60.0)
        return dist

    @staticmethod
    def focal_weight(distance: int | None) -> float:
        if distance is None:
            return UNREACHABLE
        return FOCAL_WEIGHTS[min(distance, len(FOCAL_WEIGHTS) - 1)]

    # -- search ---------------------------------------------------------------------------------

    async def edge_candidates(self, query: str, n: int) -> list[SearchResult]:
        """graphiti's hybrid edge search (BM25 + cosine, RRF), weighted by focal distance."""
        graph = self.require()
        found, dist, named_edges = await asyncio.gather(graph.hybrid_edges(query, n), self.distances(),
                                                        graph.edges_naming(query))
        seen = {e.uuid for e in found}
        # Facts about an entity the question names join the candidates even when the text search
        # missed them (a bare name has little for BM25 or cosine to hold on to).
        found = found + [e for e in named_edges if e.uuid not in seen]
        edges = [e for e in found if e.name != DUPLICATE]
        names = await graph.node_names([u for e in edges for u in (e.source_node_uuid, e.target_node_uuid)])
        out = []
        said = f" {' '.join(_words(query))} "
        for rank, e in enumerate(edges):
            d = [dist[u] for u in (e.source_node_uuid, e.target_node_uuid) if u in dist]
            distance = min(d) if d else None
            relevance = 1.0 / (1.0 + rank / RANK_SCALE)
            named = any(f" {' '.join(_words(names.get(u, '')))} " in said
                        for u in (e.source_node_uuid, e.target_node_uuid) if _words(names.get(u, "")))
            if named:  # however far down the text search put it
                relevance = max(relevance, 1.0 / (1.0 + NAMED_RANK / RANK_SCALE))
            boost = MENTION_BOOST if named else 1.0
            out.append(self.edge_result(e, names, relevance * boost * self.focal_weight(distance),
                                        relevance=round(relevance, 4), focal_distance=distance, named=named))
        out.sort(key=lambda r: -r.score)
        return out

    def edge_result(self, e: Edge, names: dict[str, str], score: float, **extra: Any) -> SearchResult:
        from .graph import as_utc

        valid = as_utc(e.valid_at)
        invalid = as_utc(e.invalid_at)
        created = as_utc(e.created_at)
        return SearchResult(
            layer=self.name, content=e.fact, source=e.uuid, score=score,
            timestamp=to_storage(valid) if valid else None,
            metadata={"kind": "edge", "subject": names.get(e.source_node_uuid, "?"), "predicate": e.name,
                      "object": names.get(e.target_node_uuid, "?"), "source_node_uuid": e.source_node_uuid,
                      "target_node_uuid": e.target_node_uuid,
                      "valid_at": to_storage(valid) if valid else None,
                      "invalid_at": to_storage(invalid) if invalid else None,
                      "created_at": to_storage(created) if created else None, **extra})

    def node_result(self, node: Node, score: float, **extra: Any) -> SearchResult:
        from .graph import as_utc

        created = as_utc(node.created_at)
        text = f"{node.name}: {node.summary}" if node.summary else node.name
        return SearchResult(layer=self.name, content=text, source=node.uuid, score=score,
                            timestamp=to_storage(created) if created else None,
                            metadata={"kind": "node", "name": node.name, "labels": list(node.labels or []),
                                      **extra})

    def default_rankers(self) -> list:
        if self.name in self.memory.settings.rankers:
            return []  # configured: memory.search_layer applies them
        return self.rankers

    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        """Edges only (ambient recall and texture_search share it): over-fetch, rank, trim."""
        want = offset + limit
        results = await self.edge_candidates(query, max(self.settings.edge_overfetch, 2 * want))
        for ranker in self.default_rankers():
            results = ranker.rerank(query, results, want)
        return results[offset:want]

    async def search_nodes(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        """Entity nodes by hybrid search, reranked by graph distance from the focal entity."""
        if limit <= 0:
            return []
        want = offset + limit
        found, dist = await asyncio.gather(self.require().hybrid_nodes(query, max(10, 2 * want)), self.distances())
        out = []
        for rank, node in enumerate(found):
            relevance = 1.0 / (1.0 + rank / RANK_SCALE)
            d = dist.get(node.uuid)
            out.append(self.node_result(node, relevance * self.focal_weight(d), relevance=round(relevance, 4),
                                        focal_distance=d))
        out.sort(key=lambda r: -r.score)
        return out[offset:want]

    async def ingest_pending(self) -> dict[str, Any]:
        """One ingestion batch now (``pps_core.contracts.Ingester``: upkeep calls it)."""
        return await self.ingestor.ingest_batch(20)

    def _export_settings(self) -> GraphitiSettings:
        """An embedded graph file at :data:`SERVER_EXPORT`: where a graph server's partition goes in a backup."""
        return type(self.settings).model_validate({**self.settings.model_dump(), "driver": "kuzu",
                                                   "path": SERVER_EXPORT})

    async def _export_server_graph(self, dest: Path) -> list[str]:
        """A graph server's partition of this entity (FalkorDB, Neo4j), copied with writes paused into an embedded
        graph file in the archive (``pps graph migrate``'s copy, checked kind by kind)."""
        from .graph import Graph
        from .migrate import _NoEmbedder, copy_graph

        assert self.graph is not None
        async with self.write_lock:
            out = await asyncio.to_thread(Graph, self._export_settings(), dest, self.group_id, _NoEmbedder(),
                                          llm_settings(self.memory.settings))
            try:
                await out.ensure_indexes()
                report = await copy_graph(self.graph, out)
            finally:
                await out.close()
        if report["problems"]:
            raise RuntimeError("the graph server's partition was not copied whole: " + "; ".join(report["problems"]))
        return [str(p.relative_to(dest)) for p in sorted((dest / SERVER_EXPORT).parent.glob("server-graph.kuzu*"))]

    async def _import_server_graph(self, export: Path, old_group: str) -> None:
        """``pps restore`` of a graph-server entity: the archive's partition (its embedded export) into the server,
        under this entity's partition (a new name moves it); the export is removed from the home afterwards."""
        from .graph import Graph
        from .migrate import KINDS, _is_empty, _NoEmbedder, read_all

        assert self.graph is not None
        src = await asyncio.to_thread(Graph, self._export_settings(), Path(self.memory.home), old_group,
                                      _NoEmbedder(), llm_settings(self.memory.settings))
        try:
            async with self.write_lock:
                if not await _is_empty(self.graph):
                    raise Conflict(f"rich_texture: the {self.settings.driver} graph already holds this "
                                   f"entity's partition ({self.group_id!r}); restore into an empty one (another "
                                   "entity name, or another graph server)")
                for kind in KINDS:
                    for obj in await read_all(src, kind):
                        obj.group_id = self.group_id
                        await obj.save(self.graph.driver)
        finally:
            await src.close()
        for path in export.parent.glob("server-graph.kuzu*"):
            path.unlink()
        self._focal = (None, 0.0)
        self.changed()
        log.info("restored the graph partition %r into the %s server", self.group_id, self.settings.driver)

    async def snapshot(self, dest: Path) -> list[str] | None:
        """The embedded graph, copied with writes paused and the WAL checkpointed into the main file; a graph
        server's partition exported into an embedded file (:meth:`_export_server_graph`)."""
        if self.graph is None:
            return None
        if not self.settings.embedded:
            return await self._export_server_graph(dest)
        home = Path(self.memory.home).resolve()
        db = (home / self.settings.db_file).resolve()
        if home not in db.parents:
            return None
        rel = db.relative_to(home)
        from .compact import reopen

        async with self.write_lock:  # every write path of this layer takes it
            await reopen(self)  # closing checkpoints the WAL; and Kuzu crashes exporting after a checkpoint
            # A compacted copy (EXPORT, then IMPORT into a fresh file), not the file itself: Kuzu keeps deleted
            # values in its pages, so a forgotten turn's episode and facts would still be in a plain copy.
            export = dest / ".graph-export"
            await self.graph.query(f"EXPORT DATABASE '{_cypher_path(export)}'")
            try:
                await _import_db(self, export, dest / rel)
            finally:
                await asyncio.to_thread(shutil.rmtree, export, True)
        return [str(rel), f"{rel}.wal"]  # the live WAL is left behind: the checkpoint folded it in

    async def after_restore(self, manifest: dict[str, Any]) -> None:
        """Restored under another entity name: the graph's partition (group id, derived from the name) moves from
        the archive's name to this one, so every entity, fact and episode is found again. A graph on a server
        (Neo4j, FalkorDB): the archive's export of its partition goes into the server (:meth:`_import_server_graph`),
        under this entity's partition."""
        old_entity = manifest.get("entity")
        if not old_entity or self.graph is None:
            return
        old = self.settings.resolved_group_id(str(old_entity))
        if not self.settings.embedded:
            export = Path(self.memory.home) / SERVER_EXPORT
            if export.exists():
                await self._import_server_graph(export, old)
            return
        if old == self.group_id:
            return
        graph = self.graph
        async with self.write_lock:
            for label in ("Entity", "Episodic", "Community", "RelatesToNode_", "Saga"):
                await _move_group(graph, f"MATCH (n:{label}) WHERE n.group_id = $old SET n.group_id = $new",
                                  old, self.group_id)
            for rel in ("MENTIONS", "HAS_MEMBER", "HAS_EPISODE", "NEXT_EPISODE"):
                await _move_group(graph, f"MATCH ()-[r:{rel}]->() WHERE r.group_id = $old SET r.group_id = $new",
                                  old, self.group_id)
            from .compact import reopen

            await reopen(self)  # folds the WAL into the file (never CHECKPOINT on the live graph: see reopen)
            self._focal = (None, 0.0)
            self.changed()
        log.info("moved the graph partition %r to %r after a restore", old, self.group_id)

    async def ready(self) -> str | None:
        """``/ready``: a graph on a server (FalkorDB, Neo4j) needs it to answer now; the embedded one is ready once
        open. No address in the answer (anyone may read it)."""
        if self.graph is None or self.settings.embedded:
            return None
        try:
            await self.graph.query("RETURN 1 AS ok")
        except Exception as exc:  # noqa: BLE001 - readiness reports, never raises
            log.debug("graph server readiness: %s: %s", type(exc).__name__, exc)
            return f"the graph server ({self.settings.driver}) is unreachable; try again shortly"
        return None

    async def health(self) -> LayerHealth:
        backlog = {}
        queues = self.memory.find(IngestionQueue)
        if queues:
            raw = queues[0]
            try:
                backlog["uningested"] = int(await _maybe_async(raw.count_uningested()))
            except Exception as exc:  # the raw layer reports its own trouble
                log.debug("count_uningested failed: %s", exc)
        if self.graph is None:
            return LayerHealth(layer=self.name, available=False, detail="graph not open", backlog=backlog)
        if self.fault:
            return LayerHealth(layer=self.name, available=False, backlog=backlog,
                               detail=f"a write failed ({self.fault}); writes are refused until the server restarts")
        try:
            counts = await self.graph.counts()
        except Exception as exc:
            return LayerHealth(layer=self.name, available=False, detail=f"{type(exc).__name__}: {exc}",
                               backlog=backlog)
        llm = "LLM configured" if llm_settings(self.memory.settings).configured else "no LLM: ingestion off, triplets only"
        return LayerHealth(layer=self.name, available=True, counts=counts, backlog=backlog,
                           detail=f"{self.settings.driver} graph '{self.group_id}'; {llm}",
                           latency_ms=self.recent_latency_ms)


async def _move_group(graph: Graph, cypher: str, old: str, new: str) -> None:
    try:
        await graph.query(cypher, old=old, new=new)
    except RuntimeError as exc:  # a table this graphiti version does not create
        if "does not exist" not in str(exc):
            raise


def _cypher_path(path: Path) -> str:
    text = str(path)
    if "'" in text or "\\" in text:
        raise ValueError(f"cannot export the graph to {text!r} (a quote or backslash in the path)")
    return text


async def _import_db(layer: GraphitiLayer, export: Path, target: Path) -> None:
    """A fresh database at ``target`` from an EXPORT DATABASE folder (tables, data and indexes), built by the
    graph's engine process (a native failure there costs this call, never the server)."""
    handle = layer.require().kuzu
    assert handle is not None
    _cypher_path(export)
    await asyncio.wrap_future(handle.engine.call("import_db", str(export), str(target), handle.fts))


async def _maybe_async(value):
    if asyncio.iscoroutine(value):
        return await value
    return value


def _words(text: str) -> list[str]:
    import re

    return re.findall(r"\w+", text.casefold())
