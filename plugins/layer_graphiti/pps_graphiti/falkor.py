"""FalkorDB read paths that do not carry vectors back to Python.

graphiti's FalkorDB queries return ``properties(e)`` for every edge, which holds the 384-float fact embedding;
the falkordb client parses each vector at about 3 ms, so a 20-edge answer spent ~90 ms parsing floats nobody
reads, and graphiti's cosine search ~400 ms at 200 facts (bench/graph.py). Here the attributes come back as
key/value pairs without the embedding, and the hybrid search scores on the server and returns uuids only
(graphiti's own BM25 query text, cosine and RRF), then fetches the winners, as the Kuzu path does.
"""

from __future__ import annotations

import asyncio
from typing import Any

#: graphiti's FalkorDB edge return clause, the attributes as pairs without the fact embedding.
EDGE_RETURN = """
        e.uuid AS uuid,
        startNode(e).uuid AS source_node_uuid,
        endNode(e).uuid AS target_node_uuid,
        e.group_id AS group_id,
        e.created_at AS created_at,
        e.name AS name,
        e.fact AS fact,
        e.episodes AS episodes,
        e.expired_at AS expired_at,
        e.valid_at AS valid_at,
        e.invalid_at AS invalid_at,
        e.reference_time AS reference_time,
        [k IN keys(e) WHERE k <> 'fact_embedding' | [k, e[k]]] AS attributes
"""


def record_attributes(record: dict[str, Any]) -> dict[str, Any]:
    """A row of :data:`EDGE_RETURN` as graphiti's record parser expects it (attributes as a dict)."""
    pairs = record.get("attributes")
    if isinstance(pairs, list):
        record = {**record, "attributes": {k: v for k, v in pairs}}
    return record


#: The cosine half keeps what is above ``SIM_MIN_SCORE`` in cosine similarity (``1 - cosine distance``), as on
#: Kuzu and LadybugDB (``array_cosine_similarity``). graphiti's FalkorDB query scores ``(2 - distance) / 2``, on
#: which the same 0.6 keeps every cosine above 0.2: a graph moved between engines answered the same query with
#: other facts (issue 36).


async def hybrid_edges(graph, query: str, limit: int) -> list:
    from graphiti_core.search.search_utils import fulltext_query, rrf

    from .records import SIM_MIN_SCORE

    n = 2 * limit
    vector = await graph.embed_query(query)
    text = fulltext_query(query, [graph.group_id], graph.driver)

    async def bm25() -> list[dict[str, Any]]:
        if not text:
            return []
        return await graph.query(
            "CALL db.idx.fulltext.queryRelationships('RELATES_TO', $text) YIELD relationship AS e, score "
            "WHERE e.group_id = $group_id AND startNode(e):Entity AND endNode(e):Entity "
            "RETURN e.uuid AS uuid ORDER BY score DESC LIMIT $limit", text=text, group_id=graph.group_id, limit=n)

    lexical, cosine = await asyncio.gather(bm25(), graph.query(
        "MATCH (:Entity)-[e:RELATES_TO]->(:Entity) WHERE e.group_id = $group_id "
        "WITH e, 1 - vec.cosineDistance(e.fact_embedding, vecf32($vector)) AS score "
        "WHERE score > $min_score RETURN e.uuid AS uuid ORDER BY score DESC LIMIT $limit",
        group_id=graph.group_id, vector=vector, min_score=SIM_MIN_SCORE, limit=n))
    ranked, _scores = rrf([[r["uuid"] for r in lexical], [r["uuid"] for r in cosine]])
    ranked = ranked[:limit]
    if not ranked:
        return []
    found = {e.uuid: e for e, _s, _t in await graph.edges_where("e.uuid IN $uuids", limit=len(ranked), uuids=ranked)}
    return [found[u] for u in ranked if u in found]


NODE_RETURN = """
        n.uuid AS uuid,
        n.name AS name,
        n.group_id AS group_id,
        n.created_at AS created_at,
        n.summary AS summary,
        labels(n) AS labels,
        [k IN keys(n) WHERE k <> 'name_embedding' | [k, n[k]]] AS attributes
"""


async def hybrid_nodes(graph, query: str, limit: int) -> list:
    """graphiti's node hybrid search (BM25 over names and summaries + cosine over name embeddings, RRF)."""
    from graphiti_core.graph_queries import get_nodes_query
    from graphiti_core.nodes import get_entity_node_from_record
    from graphiti_core.search.search_utils import fulltext_query, rrf

    from .records import SIM_MIN_SCORE

    n = 2 * limit
    vector = await graph.embed_query(query)
    text = fulltext_query(query, [graph.group_id], graph.driver)

    async def bm25() -> list[dict[str, Any]]:
        if not text:
            return []
        return await graph.query(
            get_nodes_query("node_name_and_summary", "$text", n, graph.provider)
            + " YIELD node AS n, score WHERE n.group_id = $group_id RETURN n.uuid AS uuid ORDER BY score DESC "
              "LIMIT $limit", text=text, group_id=graph.group_id, limit=n)

    lexical, cosine = await asyncio.gather(bm25(), graph.query(
        "MATCH (n:Entity) WHERE n.group_id = $group_id "
        "WITH n, 1 - vec.cosineDistance(n.name_embedding, vecf32($vector)) AS score "
        "WHERE score > $min_score RETURN n.uuid AS uuid ORDER BY score DESC LIMIT $limit",
        group_id=graph.group_id, vector=vector, min_score=SIM_MIN_SCORE, limit=n))
    ranked, _scores = rrf([[r["uuid"] for r in lexical], [r["uuid"] for r in cosine]])
    ranked = ranked[:limit]
    if not ranked:
        return []
    rows = await graph.query(f"MATCH (n:Entity) WHERE n.uuid IN $uuids RETURN {NODE_RETURN}", uuids=ranked)
    found = {r["uuid"]: get_entity_node_from_record(record_attributes(r), graph.provider) for r in rows}
    return [found[u] for u in ranked if u in found]
