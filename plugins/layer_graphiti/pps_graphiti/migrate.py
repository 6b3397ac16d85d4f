"""``pps graph migrate --to falkordb|neo4j|kuzu``: move an entity's graph from its configured driver to another.

Everything graphiti keeps for the entity's partition is copied with its stored embeddings (no embedder, no LLM):
entities, facts (with their validity times), episodes, the episodes' mentions, communities and sagas, read in
pages as graphiti's own model objects and written in batches with the properties graphiti's own saves write (one
by one where the engine takes no batch: Neo4j, communities, sagas). Then both graphs are counted kind by kind and
every object compared field by field (times, attributes, labels, embeddings); any difference fails the command. The source is left as it was, and
a target that already holds this entity's partition is refused (nothing is merged or overwritten). Afterwards
``[graphiti]`` in pps.toml is switched by hand (the command prints the lines).

The entity's servers must be stopped: the owner lock is taken when either side is the embedded Kuzu file.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .settings import EMBEDDED

PAGE = 500


@dataclass(frozen=True)
class Kind:
    name: str
    module: str
    cls: str
    embedding: str | None = None  # load_<...> method name when get_by_group_ids cannot return embeddings


KINDS = (
    Kind("entities", "nodes", "EntityNode"),
    Kind("episodes", "nodes", "EpisodicNode"),
    Kind("communities", "nodes", "CommunityNode", "load_name_embedding"),
    Kind("sagas", "nodes", "SagaNode"),
    Kind("facts", "edges", "EntityEdge"),
    Kind("mentions", "edges", "EpisodicEdge"),
    Kind("community members", "edges", "CommunityEdge"),
    Kind("saga episodes", "edges", "HasEpisodeEdge"),
    Kind("episode order", "edges", "NextEpisodeEdge"),
)


class _NoEmbedder:
    """Migration copies stored vectors; anything asking for a new one is a bug, said loudly."""

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("pps graph migrate copies stored embeddings and must not compute new ones")


def _model(kind: Kind):
    import importlib

    return getattr(importlib.import_module(f"graphiti_core.{kind.module}"), kind.cls)


def _missing_table(exc: Exception) -> bool:
    """A kind this driver's schema does not have (Kuzu without saga tables): nothing of it to copy."""
    text = str(exc)
    return "does not exist" in text or "not exist" in text or "Binder exception" in text


async def _page(cls, graph, **kw: Any) -> list[Any]:
    from graphiti_core.errors import GroupsEdgesNotFoundError, GroupsNodesNotFoundError

    try:
        return list(await cls.get_by_group_ids(graph.driver, [graph.group_id], **kw))
    except (GroupsEdgesNotFoundError, GroupsNodesNotFoundError):  # graphiti's answer for "none"
        return []


def _drop_ends(edge) -> None:
    """graphiti's FalkorDB save stores its own parameters ``source_uuid`` / ``target_uuid`` on the relationship,
    and its reader hands every property it does not know back as an attribute: the edge's ends are not
    attributes, and carried into Kuzu they would be (``attributes`` JSON)."""
    attrs = edge.attributes or {}
    for key, end in (("source_uuid", edge.source_node_uuid), ("target_uuid", edge.target_node_uuid)):
        if attrs.get(key) == end:
            del attrs[key]


async def read_all(graph, kind: Kind) -> list[Any]:
    """Every object of one kind in the graph's partition, with embeddings, in pages of PAGE.

    graphiti pages by uuid (``uuid < $cursor ORDER BY uuid DESC LIMIT``), taking the last row as the next cursor;
    FalkorDB does not hand a page back in that order, so the last row was not the smallest and pages overlapped
    (a 3,040-fact graph read back with duplicates: "counts differ"). The cursor here is the page's smallest uuid,
    and each object is kept once."""
    cls = _model(kind)
    out: dict[str, Any] = {}
    cursor: str | None = None
    while True:
        kw: dict[str, Any] = {"limit": PAGE, "uuid_cursor": cursor}
        if kind.cls in ("EntityNode", "EntityEdge"):
            kw["with_embeddings"] = True
        try:
            page = await _page(cls, graph, **kw)
        except Exception as exc:
            if _missing_table(exc):
                return list(out.values())
            raise
        fresh = [obj for obj in page if obj.uuid not in out]
        if kind.cls == "EntityEdge":
            for obj in fresh:
                _drop_ends(obj)
        if kind.embedding:
            for obj in fresh:
                await getattr(obj, kind.embedding)(graph.driver)
        out.update((obj.uuid, obj) for obj in fresh)
        if len(page) < PAGE or not fresh:
            return list(out.values())
        cursor = min(obj.uuid for obj in page)


def _stamp(value) -> str | None:
    from .graph import as_utc

    v = as_utc(value)
    return v.isoformat() if v is not None else None


def _vector(values) -> int | None:
    """An embedding compared at float32 precision (every engine stores float32)."""
    if values is None:
        return None
    import struct

    return hash(struct.pack(f"{len(values)}f", *values))


def _attrs(value) -> str:
    import json

    return json.dumps(value or {}, sort_keys=True, default=str)


def fields(kind: Kind, o: Any) -> dict[str, Any]:
    """What must survive the move, per object: its uuid, its text, its ends, times, attributes, labels and
    embedding (facts: created, valid, invalid, expired; episodes: created, valid, source, the facts it gave)."""
    if kind.cls == "EntityEdge":
        return {"uuid": o.uuid, "source": o.source_node_uuid, "target": o.target_node_uuid, "name": o.name,
                "fact": o.fact, "episodes": tuple(sorted(o.episodes or [])), "created_at": _stamp(o.created_at),
                "valid_at": _stamp(o.valid_at), "invalid_at": _stamp(o.invalid_at),
                "expired_at": _stamp(o.expired_at), "reference_time": _stamp(o.reference_time),
                "attributes": _attrs(o.attributes), "fact_embedding": _vector(o.fact_embedding)}
    if kind.cls == "EpisodicNode":
        return {"uuid": o.uuid, "name": o.name, "content": o.content, "created_at": _stamp(o.created_at),
                "valid_at": _stamp(o.valid_at), "source": o.source.value, "source_description": o.source_description,
                "entity_edges": tuple(sorted(o.entity_edges or []))}
    if kind.cls == "EntityNode":
        return {"uuid": o.uuid, "name": o.name, "summary": o.summary, "labels": tuple(sorted(o.labels or [])),
                "created_at": _stamp(o.created_at), "attributes": _attrs(o.attributes),
                "name_embedding": _vector(o.name_embedding)}
    if kind.module == "edges":
        return {"uuid": o.uuid, "source": o.source_node_uuid, "target": o.target_node_uuid,
                "created_at": _stamp(o.created_at)}
    return {"uuid": o.uuid, "name": o.name, "created_at": _stamp(o.created_at)}


def fingerprint(kind: Kind, objs: list[Any]) -> set[tuple]:
    """Every object's :func:`fields`, comparable as a set."""
    return {tuple(fields(kind, o).values()) for o in objs}


def differences(kind: Kind, want: list[Any], got: list[Any]) -> str:
    """Which fields differ, for the problem line: ``fact_embedding (600), attributes (86)``."""
    from collections import Counter

    moved = {o.uuid: fields(kind, o) for o in got}
    seen: Counter[str] = Counter()
    for o in want:
        a, b = fields(kind, o), moved.get(o.uuid)
        if b is None:
            seen["missing"] += 1
        else:
            seen.update(k for k in a if a[k] != b[k])
    return ", ".join(f"{k} ({n})" for k, n in seen.most_common())


#: Objects per statement where the target takes them in batches (Kuzu, LadybugDB, FalkorDB: entities, facts,
#: episodes, mentions); one statement is one transaction.
BATCH = 500

#: graphiti's single saves on Kuzu (``EntityNode.save``, ``EntityEdge.save``, ``EpisodicNode.save``,
#: ``EpisodicEdge.save``: the same MERGE and SETs) over a batch of rows. A field that is None in every row of a
#: batch reaches Kuzu as a STRING null, hence the casts.
KUZU_BATCH = {
    "EntityNode": """UNWIND $rows AS r MERGE (n:Entity {uuid: r.uuid})
        SET n.name = r.name, n.group_id = r.group_id, n.labels = CAST(r.labels AS STRING[]),
            n.created_at = CAST(r.created_at AS TIMESTAMP), n.name_embedding = CAST(r.name_embedding AS FLOAT[]),
            n.summary = r.summary, n.attributes = r.attributes""",
    "EntityEdge": """UNWIND $rows AS r MATCH (source:Entity {uuid: r.source_uuid}) MATCH (target:Entity {uuid: r.target_uuid})
        MERGE (source)-[:RELATES_TO]->(e:RelatesToNode_ {uuid: r.uuid})-[:RELATES_TO]->(target)
        SET e.group_id = r.group_id, e.created_at = CAST(r.created_at AS TIMESTAMP), e.name = r.name, e.fact = r.fact,
            e.fact_embedding = CAST(r.fact_embedding AS FLOAT[]), e.episodes = CAST(r.episodes AS STRING[]),
            e.expired_at = CAST(r.expired_at AS TIMESTAMP), e.valid_at = CAST(r.valid_at AS TIMESTAMP),
            e.invalid_at = CAST(r.invalid_at AS TIMESTAMP), e.reference_time = CAST(r.reference_time AS TIMESTAMP),
            e.attributes = r.attributes""",
    "EpisodicNode": """UNWIND $rows AS r MERGE (n:Episodic {uuid: r.uuid})
        SET n.name = r.name, n.group_id = r.group_id, n.created_at = CAST(r.created_at AS TIMESTAMP),
            n.source = r.source, n.source_description = r.source_description, n.content = r.content,
            n.valid_at = CAST(r.valid_at AS TIMESTAMP), n.entity_edges = CAST(r.entity_edges AS STRING[])""",
    "EpisodicEdge": """UNWIND $rows AS r MATCH (episode:Episodic {uuid: r.episode_uuid})
        MATCH (node:Entity {uuid: r.entity_uuid}) MERGE (episode)-[e:MENTIONS {uuid: r.uuid}]->(node)
        SET e.group_id = r.group_id, e.created_at = CAST(r.created_at AS TIMESTAMP)""",
}
#: The same on FalkorDB (graphiti's FalkorDB saves over a batch; an entity's labels are written per label set).
FALKOR_BATCH = {
    "EntityNode": """UNWIND $rows AS r MERGE (n:Entity {{uuid: r.uuid}}) SET n:{labels} SET n = r
        SET n.name_embedding = vecf32(r.name_embedding)""",
    "EntityEdge": """UNWIND $rows AS r MATCH (source:Entity {uuid: r.source_uuid}) MATCH (target:Entity {uuid: r.target_uuid})
        MERGE (source)-[e:RELATES_TO {uuid: r.uuid}]->(target) SET e = r SET e.fact_embedding = vecf32(r.fact_embedding)""",
    "EpisodicNode": """UNWIND $rows AS r MERGE (n:Episodic {uuid: r.uuid})
        SET n = {uuid: r.uuid, name: r.name, group_id: r.group_id, source_description: r.source_description,
                 source: r.source, content: r.content, entity_edges: r.entity_edges, created_at: r.created_at,
                 valid_at: r.valid_at}""",
    "EpisodicEdge": """UNWIND $rows AS r MATCH (episode:Episodic {uuid: r.episode_uuid})
        MATCH (node:Entity {uuid: r.entity_uuid}) MERGE (episode)-[e:MENTIONS {uuid: r.uuid}]->(node)
        SET e.group_id = r.group_id, e.created_at = r.created_at""",
}
_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def save_row(obj: Any, kuzu: bool) -> dict[str, Any]:
    """The parameters graphiti's single save sends for ``obj`` (EntityNode, EntityEdge, EpisodicNode,
    EpisodicEdge), as one row of a batch."""
    import json

    name = type(obj).__name__
    if name == "EpisodicNode":
        return {"uuid": obj.uuid, "name": obj.name, "group_id": obj.group_id, "source_description":
                obj.source_description, "content": obj.content, "entity_edges": obj.entity_edges,
                "created_at": obj.created_at, "valid_at": obj.valid_at, "source": obj.source.value}
    if name == "EpisodicEdge":
        return {"episode_uuid": obj.source_node_uuid, "entity_uuid": obj.target_node_uuid, "uuid": obj.uuid,
                "group_id": obj.group_id, "created_at": obj.created_at}
    if name == "EntityNode":
        row = {"uuid": obj.uuid, "name": obj.name, "name_embedding": obj.name_embedding, "group_id": obj.group_id,
               "summary": obj.summary, "created_at": obj.created_at}
        if kuzu:
            return {**row, "attributes": json.dumps(obj.attributes), "labels": sorted(set(obj.labels + ["Entity"]))}
    else:
        row = {"source_uuid": obj.source_node_uuid, "target_uuid": obj.target_node_uuid, "uuid": obj.uuid,
               "name": obj.name, "group_id": obj.group_id, "fact": obj.fact, "fact_embedding": obj.fact_embedding,
               "episodes": obj.episodes, "created_at": obj.created_at, "expired_at": obj.expired_at,
               "valid_at": obj.valid_at, "invalid_at": obj.invalid_at, "reference_time": obj.reference_time}
        if kuzu:
            return {**row, "attributes": json.dumps(obj.attributes)}
    return {**{k: v for k, v in (obj.attributes or {}).items() if k not in row}, **row}


async def write_all(graph, kind: Kind, objs: list[Any], bar=None) -> None:
    """Write ``objs`` into ``graph``: in batches of :data:`BATCH` where the engine takes them (what graphiti's
    single saves write, one statement per batch: a 3,000-fact graph moved one object at a time took 30-100 s),
    else one at a time with graphiti's own ``save`` (Neo4j; communities, sagas and their edges, few)."""
    kuzu = graph.kuzu is not None
    batch = (KUZU_BATCH if kuzu else FALKOR_BATCH if graph.kind == "falkordb" else {}).get(kind.cls)
    if batch is None or not objs:
        for obj in objs:
            await obj.save(graph.driver)
            if bar is not None:
                bar.update(1)
        return
    groups: dict[str, list[Any]] = {"": objs}
    if kind.cls == "EntityNode" and not kuzu:  # FalkorDB sets labels by name: one statement per label set
        groups = {}
        for obj in objs:
            groups.setdefault(":".join(obj.labels + ["Entity"]), []).append(obj)
    for labels, members in groups.items():
        if labels and not all(_LABEL.fullmatch(label) for label in labels.split(":")):
            for obj in members:  # a label that is not a plain name: graphiti's own save decides
                await obj.save(graph.driver)
                if bar is not None:
                    bar.update(1)
            continue
        cypher = batch.format(labels=labels) if labels else batch
        for i in range(0, len(members), BATCH):
            chunk = members[i:i + BATCH]
            await graph.query(cypher, rows=[save_row(obj, kuzu) for obj in chunk])
            if bar is not None:
                bar.update(len(chunk))


async def fulltext(graph, build: bool) -> None:
    """Kuzu's full-text indexes dropped (``build=False``) before a batched copy and built over the copied tables
    after it: Kuzu 0.11.3 crashes (SIGSEGV) on a multi-row statement into a table with a full-text index (the
    episodes), and keeps an index's statistics up to date row by row only (BM25 after batched rows differs from
    an index built over the same rows; bench/graph.py's writer builds them again too)."""
    from .engine_client import _PATIENT
    from .records import FULLTEXT_INDEXES

    token = _PATIENT.set(True)  # building an index reads every row
    try:
        have = {r["index_name"] for r in await graph.query("CALL SHOW_INDEXES() RETURN index_name")}
        for stmt in FULLTEXT_INDEXES:
            table, name = stmt.split("'")[1], stmt.split("'")[3]
            if build and name not in have:
                await graph.query(stmt)
            elif not build and name in have:
                await graph.query(f"CALL DROP_FTS_INDEX('{table}', '{name}')")
    finally:
        _PATIENT.reset(token)


async def copy_graph(source, target, bar=None) -> dict[str, Any]:
    """Copy every kind from ``source`` to ``target`` (both :class:`pps_graphiti.graph.Graph`), then verify."""
    found = {k.name: await read_all(source, k) for k in KINDS}
    if bar is not None:
        bar.total = sum(len(v) for v in found.values())
        bar.refresh()
    indexed = target.kuzu is not None and target.kuzu.fts
    if indexed:
        await fulltext(target, build=False)
    for kind in KINDS:  # nodes first: edges need both ends
        await write_all(target, kind, found[kind.name], bar)
    if indexed:
        await fulltext(target, build=True)
    report: dict[str, Any] = {"copied": {}, "problems": []}
    for kind in KINDS:
        moved = await read_all(target, kind)
        want, got = fingerprint(kind, found[kind.name]), fingerprint(kind, moved)
        report["copied"][kind.name] = len(moved)
        if len(moved) != len(found[kind.name]) or want != got:
            report["problems"].append(f"{kind.name}: {len(found[kind.name])} in the source, {len(moved)} in the "
                                      f"target, {len(want - got)} missing or changed: "
                                      + differences(kind, found[kind.name], moved))
    return report


async def copy_novelty(home: Path, src, source_settings, dst, target_settings) -> int:
    """The novelty counts (how often each fact surfaced, :class:`~pps_graphiti.rankers.Novelty`) go with the graph:
    an embedded graph keeps them in ``graphiti/novelty.sqlite3``, a graph server as ``PPSSurfaced`` nodes
    (:mod:`.novelty_graph`). Answers how many were carried (none between two embedded graphs of one home: they
    share the file)."""
    from .novelty_graph import LOAD
    from .rankers import Novelty

    if source_settings.embedded and target_settings.embedded:
        return 0
    store = Novelty(home / "graphiti" / "novelty.sqlite3")
    if source_settings.embedded:
        counts = dict(store._load())
    else:
        rows = await src.query(LOAD, group_id=src.group_id)
        counts = {(r["layer"], r["source"]): (float(r["count"]), float(r["last"])) for r in rows}
    if not counts:
        return 0
    if target_settings.embedded:
        held = store._load()
        held.update(counts)
        store._dirty.update(counts)
        store.flush()
    else:
        rows = [{"layer": la, "source": so, "count": c, "last": last} for (la, so), (c, last) in counts.items()]
        for i in range(0, len(rows), PAGE):
            await dst.query("UNWIND $rows AS r MERGE (s:PPSSurfaced {group_id: $group_id, layer: r.layer, "
                            "source: r.source}) SET s.count = r.count, s.last = r.last",
                            group_id=dst.group_id, rows=rows[i:i + PAGE])
    return len(counts)


async def _is_empty(graph) -> bool:
    for kind in KINDS[:2] + KINDS[4:5]:  # entities, episodes, facts
        if await _page(_model(kind), graph, limit=1):
            return False
    return True


async def migrate(home: Path, entity: str, source_settings, target_settings, llm_settings, bar=None) -> dict:
    from pps_core.errors import ConfigError

    from .graph import Graph

    group_id = source_settings.resolved_group_id(entity)
    src = await asyncio.to_thread(Graph, source_settings, home, group_id, _NoEmbedder(), llm_settings)
    try:
        dst = await asyncio.to_thread(Graph, target_settings, home, group_id, _NoEmbedder(), llm_settings)
        try:
            await dst.ensure_indexes()
            if not await _is_empty(dst):
                raise ConfigError(f"the {target_settings.driver} graph already holds entity {entity!r} (partition "
                                  f"{group_id!r}): nothing was copied. Empty that partition first, or choose "
                                  "another target (--path, --host/--port, --uri)")
            report = await copy_graph(src, dst, bar)
            report["novelty"] = await copy_novelty(home, src, source_settings, dst, target_settings)
            if dst.provider.value == "kuzu":
                await dst.query("CHECKPOINT;")
        finally:
            await dst.close()
    finally:
        await src.close()
    return {"entity": entity, "group_id": group_id, "from": source_settings.driver,
            "to": target_settings.driver, **report}


def target_settings(source, args: argparse.Namespace):
    """The entity's [graphiti] settings with the driver and connection options of the command line."""
    update: dict[str, Any] = {"driver": args.to}
    if args.to != source.driver and args.to in EMBEDDED:  # another engine's file: its own default name
        update["path"] = None
    for name in ("path", "host", "port", "uri", "user"):
        value = getattr(args, name, None)
        if value is not None:
            update[name] = value
    if args.password_env:
        import os

        from pydantic import SecretStr

        secret = os.environ.get(args.password_env)
        if secret is None:
            raise SystemExit(f"pps graph migrate: --password-env: ${args.password_env} is not set")
        update["password" if args.to == "neo4j" else "falkordb_password"] = SecretStr(secret)
    return type(source).model_validate({**source.model_dump(), **update})


def toml_lines(t) -> list[str]:
    lines = ["[graphiti]", f'driver = "{t.driver}"']
    if t.embedded:
        lines.append(f'path = "{t.path}"')
    elif t.driver == "falkordb":
        lines += [f'host = "{t.host}"', f"port = {t.port}"]
    else:
        lines += [f'uri = "{t.uri}"', f'user = "{t.user}"']
    return lines


def cmd_graph_migrate(args: argparse.Namespace) -> int:
    import json

    from pps_llm.settings import llm_settings

    from pps_core.errors import PPSError
    from pps_core.progress import progress
    from pps_core.settings import load_settings

    from .settings import GraphitiSettings

    settings = load_settings(args.entity, args.home, must_exist=True)
    source = settings.plugin_settings(GraphitiSettings, "graphiti")
    target = target_settings(source, args)
    if source.driver == target.driver and target.embedded and source.path == target.path:
        print("pps graph migrate: the target is the source (give another --path)", file=sys.stderr)
        return 2
    if source.driver == target.driver and not target.embedded and (source.host, source.port, source.uri) == (
            target.host, target.port, target.uri):
        print("pps graph migrate: the target is the source (give another --host/--port or --uri)", file=sys.stderr)
        return 2
    home = Path(settings.home)
    lock = None
    if source.embedded or target.embedded:
        from pps_core.owner import OwnerLock

        lock = OwnerLock(home)
        try:
            lock.acquire()
        except PPSError as exc:
            print(f"pps graph migrate: {exc}", file=sys.stderr)
            return 1
    try:
        with progress(None, f"copying the graph to {target.driver}", unit="item") as bar:
            report = asyncio.run(migrate(home, settings.entity, source, target, llm_settings(settings), bar))
    except PPSError as exc:
        print(f"pps graph migrate: {exc}", file=sys.stderr)
        return 1
    finally:
        if lock is not None:
            lock.release()
    print(json.dumps(report, indent=2))
    if report["problems"]:
        print("pps graph migrate: the copy does not match the source (see problems); the entity still uses "
              f"its {source.driver} graph", file=sys.stderr)
        return 1
    print("\nEvery kind counted and matched. To use the new graph, set in " f"{home / 'pps.toml'}:\n\n"
          + "\n".join(toml_lines(target)) + "\n\nThe old graph is left as it was (delete it once you are sure).")
    return 0


def register(cli) -> None:
    p = cli.add("graph", _dispatch, help="the knowledge graph: pps graph migrate --to falkordb|neo4j|kuzu|ladybug")
    sub = p.add_subparsers(dest="graph_command", metavar="SUBCOMMAND", required=True)
    m = sub.add_parser("migrate", help="copy the entity's graph to another driver, checked kind by kind")
    cli.entity_args(m)
    m.add_argument("--to", required=True, choices=["falkordb", "neo4j", "kuzu", "ladybug"], help="the target driver")
    m.add_argument("--path", help="kuzu, ladybug: the target file, relative to the entity's home")
    m.add_argument("--host", help="falkordb: host (default: [graphiti] host)")
    m.add_argument("--port", type=int, help="falkordb: port (default: [graphiti] port)")
    m.add_argument("--uri", help="neo4j: bolt URI (default: [graphiti] uri)")
    m.add_argument("--user", help="neo4j: user (default: [graphiti] user)")
    m.add_argument("--password-env", metavar="VAR",
                   help="the target's password from this environment variable (never on the command line)")


def _dispatch(args: argparse.Namespace) -> int:
    if args.graph_command == "migrate":
        return cmd_graph_migrate(args)
    return 2
