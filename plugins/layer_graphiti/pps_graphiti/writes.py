"""Writes and graph reads that need no LLM: triplets, delete, explore, timeline, node merging."""

from __future__ import annotations

import re
import uuid as uuidlib
from datetime import datetime
from typing import TYPE_CHECKING, Any

from graphiti_core.edges import EntityEdge, EpisodicEdge
from graphiti_core.errors import EdgeNotFoundError, NodeNotFoundError
from graphiti_core.nodes import EntityNode

from pps_core.errors import InvalidParams, NotFound
from pps_core.timeutil import now_utc, to_storage

if TYPE_CHECKING:  # pragma: no cover
    from .layer import GraphitiLayer


def relation_name(relationship: str) -> str:
    name = re.sub(r"[^A-Za-z0-9]+", "_", relationship).strip("_").upper()
    if not name:
        raise InvalidParams("relationship: must contain a letter or digit, e.g. 'WORKS_ON'", param="relationship")
    return name


def check_uuid(value: str, param: str = "uuid") -> str:
    try:
        return str(uuidlib.UUID(value.strip()))
    except (ValueError, AttributeError):
        raise InvalidParams(f"{param}: {value!r} is not a uuid (texture_search shows each fact's uuid)",
                            param=param) from None


async def _node(layer: GraphitiLayer, name: str, entity_type: str | None) -> tuple[EntityNode, bool]:
    """The entity with exactly this name (case-insensitive; the most connected one), or a new one."""
    graph = layer.require()
    rows = await graph.nodes_named(name)
    labels = ["Entity"] + ([entity_type] if entity_type and entity_type != "Entity" else [])
    if rows:
        node = await EntityNode.get_by_uuid(graph.driver, rows[0]["uuid"])
        missing = [lab for lab in labels if lab not in (node.labels or [])]
        if missing:
            await node.load_name_embedding(graph.driver)
            node.labels = list(node.labels or []) + missing
            await node.save(graph.driver)
        return node, False
    node = EntityNode(name=name, group_id=layer.group_id, labels=labels, created_at=now_utc(), summary="")
    await node.generate_name_embedding(graph.graphiti.embedder)
    await node.save(graph.driver)
    return node, True


async def add_triplet(layer: GraphitiLayer, source: str, relationship: str, target: str, fact: str | None,
                      source_type: str | None, target_type: str | None, valid_at: datetime | None) -> dict[str, Any]:
    name = relation_name(relationship)
    fact = fact or f"{source} {name.lower().replace('_', ' ')} {target}"
    graph = layer.require()
    async with layer.write_lock:
        src, src_new = await _node(layer, source, source_type)
        tgt, tgt_new = await _node(layer, target, target_type)
        for existing in await EntityEdge.get_between_nodes(graph.driver, src.uuid, tgt.uuid):
            if existing.name == name and existing.fact == fact:
                return {"created": False, "uuid": existing.uuid, "fact": fact, "source": src.name,
                        "relationship": name, "target": tgt.name, "note": "this fact already exists"}
        now = now_utc()
        edge = EntityEdge(group_id=layer.group_id, source_node_uuid=src.uuid, target_node_uuid=tgt.uuid, name=name,
                          fact=fact, episodes=[], created_at=now, valid_at=valid_at or now)
        await edge.generate_embedding(graph.graphiti.embedder)
        await edge.save(graph.driver)
        layer.changed()
    return {"created": True, "uuid": edge.uuid, "fact": fact, "source": src.name, "relationship": name,
            "target": tgt.name, "valid_at": to_storage(edge.valid_at),
            "new_entities": [n.name for n, new in ((src, src_new), (tgt, tgt_new)) if new]}


async def delete(layer: GraphitiLayer, value: str) -> dict[str, Any]:
    """Delete a fact, an entity (with its facts) or an episode (as forgetting a turn does) by uuid; the
    summaries of the entities it touched are rebuilt without it. The graph's file is compacted (the deleted
    text leaves the disk) ``compact_delay_s`` after the last delete, at once for an episode (a forget)."""
    from graphiti_core.nodes import EpisodicNode

    from .compact import compact_locked, mark_pending, schedule

    uid = check_uuid(value)
    graph = layer.require()
    gone = [uid]
    async with layer.write_lock:
        try:
            edge = await EntityEdge.get_by_uuid(graph.driver, uid)
            if edge.group_id != layer.group_id:
                raise EdgeNotFoundError(uid)
            mark_pending(layer)
            await edge.delete(graph.driver)
            await rebuild_summaries(layer, {edge.source_node_uuid, edge.target_node_uuid})
            kind, what = "fact", edge.fact
        except EdgeNotFoundError:
            try:
                node = await EntityNode.get_by_uuid(graph.driver, uid)
                if node.group_id != layer.group_id:
                    raise NodeNotFoundError(uid) from None
            except NodeNotFoundError:
                node = None
            if node is not None:
                mark_pending(layer)
                kind, what, gone = "entity", node.name, [uid, *await _delete_entity(layer, node)]
            else:
                try:
                    episode = await EpisodicNode.get_by_uuid(graph.driver, uid)
                    if episode.group_id != layer.group_id:
                        raise NodeNotFoundError(uid)
                except NodeNotFoundError:
                    raise NotFound(f"uuid: no fact, entity or episode {uid} in this entity's graph",
                                   param="uuid") from None
                mark_pending(layer)
                await forget_episodes(layer, [uid])
                kind, what = "episode", episode.name
        layer._focal = (None, 0.0)
        layer.changed()
        if kind == "episode":
            await compact_locked(layer)
    if kind != "episode":
        schedule(layer)
    if layer.novelty is not None:
        for u in gone:
            layer.novelty.forget(layer.name, u)
    return {"deleted": uid, "kind": kind, "what": what}


async def _delete_entity(layer: GraphitiLayer, node: EntityNode) -> list[str]:
    """An entity and every fact it is the subject or object of (graphiti's delete leaves, on Kuzu, the facts
    it is the object of without it); its neighbours' summaries are rebuilt. Answers the facts' uuids."""
    graph = layer.require()
    edges = await EntityEdge.get_by_node_uuid(graph.driver, node.uuid)
    for edge in edges:
        await edge.delete(graph.driver)
    await node.delete(graph.driver)
    await rebuild_summaries(layer, {u for e in edges for u in (e.source_node_uuid, e.target_node_uuid)} - {node.uuid})
    return [e.uuid for e in edges]


async def merge_nodes(layer: GraphitiLayer, canonical: str, duplicates: list[str]) -> int:
    """Fold duplicate entity nodes into ``canonical``: their facts and mentions move, then they go.

    A fact is moved copy-first, so a crash at any step leaves it in the graph: a copy under a
    temporary uuid is saved, the original deleted, the fact saved again under its own uuid, the
    copy deleted (saving under the same uuid first would be deleted with the original).
    """
    from uuid import uuid4

    graph = layer.require()
    moved = 0
    for dup in duplicates:
        for edge in await EntityEdge.get_by_node_uuid(graph.driver, dup):
            await edge.load_fact_embedding(graph.driver)
            src = canonical if edge.source_node_uuid == dup else edge.source_node_uuid
            tgt = canonical if edge.target_node_uuid == dup else edge.target_node_uuid
            if edge.name == "IS_DUPLICATE_OF" or src == tgt:
                await edge.delete(graph.driver)
                continue
            temp = edge.model_copy(update={"uuid": str(uuid4()), "source_node_uuid": src, "target_node_uuid": tgt})
            await temp.save(graph.driver)
            await edge.delete(graph.driver)
            await temp.model_copy(update={"uuid": edge.uuid}).save(graph.driver)
            await temp.delete(graph.driver)
            moved += 1
        for episode in await graph.mentioning_episodes(dup):
            await EpisodicEdge(source_node_uuid=episode, target_node_uuid=canonical, group_id=layer.group_id,
                               created_at=now_utc()).save(graph.driver)
        node = await EntityNode.get_by_uuid(graph.driver, dup)
        await node.delete(graph.driver)
    layer._distances = None
    return moved


async def rebuild_summaries(layer: GraphitiLayer, node_uuids: set[str]) -> int:
    """Each surviving entity's summary made again from the facts it still has, newest kept within graphiti's
    limit. graphiti builds a summary by appending each extracted fact (and, past that limit, has the LLM
    rewrite it), so a summary may quote or paraphrase any fact the entity ever had; once one of them is
    forgotten or deleted, the summary cannot be trusted to have lost it and is rebuilt without an LLM (the
    entity loses any prose the LLM wrote for it, and keeps every fact it still has)."""
    from graphiti_core.utils.text_utils import MAX_SUMMARY_CHARS

    graph = layer.require()
    rebuilt = 0
    for node_uuid in sorted(node_uuids):
        if not await graph.query("MATCH (n:Entity {uuid: $uuid}) RETURN n.uuid AS uuid", uuid=node_uuid):
            continue  # gone with what was forgotten
        kept: list[str] = []
        size = 0
        for fact in reversed(await graph.facts_touching(node_uuid)):
            if size + len(fact) + 1 > MAX_SUMMARY_CHARS * 2:
                break
            kept.append(fact)
            size += len(fact) + 1
        await graph.query("MATCH (n:Entity {uuid: $uuid}) SET n.summary = $summary", uuid=node_uuid,
                          summary="\n".join(reversed(kept)))
        rebuilt += 1
    return rebuilt


async def forget_episodes(layer: GraphitiLayer, uuids: list[str]) -> dict[str, int]:
    """Delete these episodes, the facts extracted only from them or whose text they wrote (a fact another episode
    wrote and this one repeated stays, without it), the entities only they mentioned, and rebuild the summaries of the entities that stay and
    were touched. The caller holds ``layer.write_lock``."""
    from graphiti_core.nodes import EpisodicNode

    graph = layer.require()
    out = {"episodes": 0, "facts": 0, "entities": 0, "summaries": 0}
    touched: set[str] = set()
    for uid in uuids:
        episode = await EpisodicNode.get_by_uuid(graph.driver, uid)
        mentioned = await graph.query("MATCH (ep:Episodic {uuid: $uuid})-[:MENTIONS]->(n:Entity) "
                                      "RETURN n.uuid AS uuid", uuid=episode.uuid)
        edges = await EntityEdge.get_by_uuids(graph.driver, list(episode.entity_edges or []))
        for edge in edges:
            touched.update((edge.source_node_uuid, edge.target_node_uuid))
            rest = [e for e in (edge.episodes or []) if e != episode.uuid]
            # graphiti merges a later turn's duplicate into the earlier edge, which keeps the fact text and
            # embedding the first episode gave it: a fact this episode wrote leaves with it even when a later turn
            # repeated it (no LLM here to write it again from what remains; issue 35 item 3).
            wrote_it = bool(edge.episodes) and edge.episodes[0] == episode.uuid
            if rest and not wrote_it:  # another turn wrote it, this one repeated it: it stays, without this one
                await edge.load_fact_embedding(graph.driver)
                edge.episodes = rest
                await edge.save(graph.driver)
                continue
            await edge.delete(graph.driver)
            out["facts"] += 1
            if layer.novelty is not None:
                layer.novelty.forget(layer.name, edge.uuid)
        await episode.delete(graph.driver)
        out["episodes"] += 1
        for m in mentioned:
            touched.add(m["uuid"])
            others = await graph.query("MATCH (ep:Episodic)-[:MENTIONS]->(n:Entity {uuid: $uuid}) "
                                       "RETURN count(*) AS c", uuid=m["uuid"])
            facts = await graph.query(f"MATCH (n:Entity {{uuid: $uuid}}){graph.hop}(x:Entity) RETURN count(*) AS c",
                                      uuid=m["uuid"])
            if int(others[0]["c"]) == 0 and int(facts[0]["c"]) == 0:
                node = await EntityNode.get_by_uuid(graph.driver, m["uuid"])
                await node.delete(graph.driver)
                out["entities"] += 1
    out["summaries"] = await rebuild_summaries(layer, touched)
    if uuids:
        layer._focal = (None, 0.0)
        layer.changed()
    return out


async def forget_turns(layer: GraphitiLayer, ids: list[int]) -> dict[str, int]:
    """Forget the episodes of forgotten turns (named ``turn <id>`` by ingestion): see :func:`forget_episodes`;
    then the graph's file is compacted, so no byte of them stays on the disk (Kuzu keeps deleted values in
    its pages)."""
    from .compact import compact_locked, mark_pending

    graph = layer.require()
    names = [f"turn {i}" for i in ids]
    async with layer.write_lock:
        rows = await graph.query("MATCH (ep:Episodic) WHERE ep.group_id = $group_id AND ep.name IN $names "
                                 "RETURN ep.uuid AS uuid", group_id=layer.group_id, names=names)
        if rows:
            mark_pending(layer)
        out = await forget_episodes(layer, [r["uuid"] for r in rows])
        if rows:
            await compact_locked(layer)
    return out
