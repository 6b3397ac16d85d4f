"""The graph's reads that list facts (explore, timeline, every fact): Kuzu alone on the embedded graph, no
graphiti_core (see :mod:`.records`)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pps_core.errors import InvalidParams, NotFound
from pps_core.timeutil import to_storage

from .graph import as_utc

if TYPE_CHECKING:  # pragma: no cover
    from .layer import GraphitiLayer
    from .records import Edge


async def explore(layer: GraphitiLayer, entity_name: str, depth: int, limit: int) -> dict[str, Any]:
    """The neighbourhood of an entity, breadth first, up to ``depth`` hops and ``limit`` facts."""
    graph = layer.require()
    rows = await graph.nodes_named(entity_name)
    if not rows:
        raise NotFound(f"entity_name: no entity named {entity_name!r} in the graph", param="entity_name")
    start = rows[0]["uuid"]
    distance = {start: 0}
    facts: dict[str, dict[str, Any]] = {}
    frontier = [start]
    for hop in range(1, depth + 1):
        if not frontier or len(facts) >= limit:
            break
        found = await graph.edges_where("(n.uuid IN $uuids OR m.uuid IN $uuids) AND e.name <> $dup",
                                        order="ORDER BY e.created_at DESC", limit=limit * 4,
                                        uuids=frontier, dup="IS_DUPLICATE_OF")
        nxt = []
        for edge, sname, tname in found:
            if edge.uuid in facts or len(facts) >= limit:
                continue
            facts[edge.uuid] = _fact(edge, sname, tname) | {"hop": hop}
            for u in (edge.source_node_uuid, edge.target_node_uuid):
                if u not in distance:
                    distance[u] = hop
                    nxt.append(u)
        frontier = nxt
    names = await graph.node_names(list(distance))
    return {"entity": rows[0]["name"], "uuid": start, "depth": depth,
            "entities": [{"uuid": u, "name": names.get(u, "?"), "distance": d}
                         for u, d in sorted(distance.items(), key=lambda t: t[1])],
            "facts": list(facts.values()), "truncated": len(facts) >= limit}


async def timeline(layer: GraphitiLayer, since: datetime, until: datetime, limit: int) -> dict[str, Any]:
    """Facts whose valid_at falls in [since, until], oldest first (the newest ``limit`` of them)."""
    if since > until:
        raise InvalidParams("since: must be before until", param="since")
    found = await layer.require().edges_where(
        "e.valid_at >= $since AND e.valid_at <= $until AND e.name <> $dup", order="ORDER BY e.valid_at DESC",
        limit=limit, since=_naive_utc(layer, since), until=_naive_utc(layer, until), dup="IS_DUPLICATE_OF")
    facts = [_fact(e, s, t) for e, s, t in found]
    facts.reverse()
    return {"since": to_storage(since), "until": to_storage(until), "count": len(facts), "facts": facts}


async def all_facts(layer: GraphitiLayer, offset: int, limit: int) -> dict[str, Any]:
    """Every fact (not duplicate markers), oldest first by creation, a page at a time.

    Keyset paging, no ``SKIP`` (Kuzu 0.11.3 and LadybugDB 0.22.0 segfault on some SKIP values past the end of
    the rows): the keys (creation time, uuid) of the first ``offset + limit`` facts are read, the page's keys cut
    here, and only the page's facts read in full. An offset past the end reads no keys at all."""
    graph = layer.require()
    total = await graph.query(f"MATCH {graph.edge_match} WHERE e.group_id = $group_id AND e.name <> $dup "
                              "RETURN count(e) AS c", group_id=layer.group_id, dup="IS_DUPLICATE_OF")
    n = int(total[0]["c"]) if total else 0
    found: list[tuple[Edge, str, str]] = []
    if offset < n:
        keys = await graph.query(f"MATCH {graph.edge_match} WHERE e.group_id = $group_id AND e.name <> $dup "
                                 "RETURN e.uuid AS uuid ORDER BY e.created_at, e.uuid LIMIT $limit",
                                 group_id=layer.group_id, dup="IS_DUPLICATE_OF", limit=min(offset + limit, n))
        page = [r["uuid"] for r in keys[offset:offset + limit]]
        if page:
            by_uuid = {e.uuid: (e, s, t) for e, s, t in await graph.edges_where("e.uuid IN $uuids", limit=len(page),
                                                                               uuids=page)}
            found = [by_uuid[u] for u in page if u in by_uuid]
    facts = []
    for edge, sname, tname in found:
        created = as_utc(edge.created_at)
        facts.append(_fact(edge, sname, tname) | {"created_at": to_storage(created) if created else None,
                                                  "episodes": len(edge.episodes or [])})
    return {"total": n, "offset": offset, "count": len(facts),
            "next_offset": offset + len(facts) if offset + len(facts) < n else None, "facts": facts}


def _naive_utc(layer: GraphitiLayer, dt: datetime) -> datetime:
    # Kuzu stores TIMESTAMP without a zone (graphiti writes UTC); compare like with like.
    return dt.replace(tzinfo=None) if layer.require().kind == "kuzu" else dt


def _fact(edge: Edge, sname: str, tname: str) -> dict[str, Any]:
    valid, invalid = as_utc(edge.valid_at), as_utc(edge.invalid_at)
    return {"uuid": edge.uuid, "subject": sname, "predicate": edge.name, "object": tname, "fact": edge.fact,
            "valid_at": to_storage(valid) if valid else None, "invalid_at": to_storage(invalid) if invalid else None}
