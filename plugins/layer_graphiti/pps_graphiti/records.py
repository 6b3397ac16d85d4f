"""The embedded graph's schema, full-text indexes and record shapes, without graphiti.

Importing any ``graphiti_core`` module costs about 1.2 s of CPU (its package imports ``Graphiti``, which imports
the OpenAI clients), so the Kuzu graph opens, searches and counts with what is here, and graphiti is imported
only when something writes through it (ingestion, triplets, deletes). Everything here is graphiti-core
0.31.1's own text and semantics for Kuzu (``driver/kuzu_driver.py``, ``graph_queries.py``,
``search/search_utils.py``, ``edges.py``, ``nodes.py``); ``tests/test_graphiti_kuzu_reads.py`` checks each
constant against graphiti's and the searches against graphiti's own, so an upgrade that changes them fails there.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: graphiti's Kuzu schema (``kuzu_driver.SCHEMA_QUERIES``): a fact is a ``RelatesToNode_`` between two entities.
SCHEMA_QUERIES = """
    CREATE NODE TABLE IF NOT EXISTS Episodic (
        uuid STRING PRIMARY KEY,
        name STRING,
        group_id STRING,
        created_at TIMESTAMP,
        source STRING,
        source_description STRING,
        content STRING,
        valid_at TIMESTAMP,
        entity_edges STRING[]
    );
    CREATE NODE TABLE IF NOT EXISTS Entity (
        uuid STRING PRIMARY KEY,
        name STRING,
        group_id STRING,
        labels STRING[],
        created_at TIMESTAMP,
        name_embedding FLOAT[],
        summary STRING,
        attributes STRING
    );
    CREATE NODE TABLE IF NOT EXISTS Community (
        uuid STRING PRIMARY KEY,
        name STRING,
        group_id STRING,
        created_at TIMESTAMP,
        name_embedding FLOAT[],
        summary STRING
    );
    CREATE NODE TABLE IF NOT EXISTS RelatesToNode_ (
        uuid STRING PRIMARY KEY,
        group_id STRING,
        created_at TIMESTAMP,
        name STRING,
        fact STRING,
        fact_embedding FLOAT[],
        episodes STRING[],
        expired_at TIMESTAMP,
        valid_at TIMESTAMP,
        invalid_at TIMESTAMP,
        reference_time TIMESTAMP,
        attributes STRING
    );
    CREATE REL TABLE IF NOT EXISTS RELATES_TO(
        FROM Entity TO RelatesToNode_,
        FROM RelatesToNode_ TO Entity
    );
    CREATE REL TABLE IF NOT EXISTS MENTIONS(
        FROM Episodic TO Entity,
        uuid STRING PRIMARY KEY,
        group_id STRING,
        created_at TIMESTAMP
    );
    CREATE REL TABLE IF NOT EXISTS HAS_MEMBER(
        FROM Community TO Entity,
        FROM Community TO Community,
        uuid STRING,
        group_id STRING,
        created_at TIMESTAMP
    );
    CREATE NODE TABLE IF NOT EXISTS Saga (
        uuid STRING PRIMARY KEY,
        name STRING,
        group_id STRING,
        created_at TIMESTAMP
    );
    CREATE REL TABLE IF NOT EXISTS HAS_EPISODE(
        FROM Saga TO Episodic,
        uuid STRING,
        group_id STRING,
        created_at TIMESTAMP
    );
    CREATE REL TABLE IF NOT EXISTS NEXT_EPISODE(
        FROM Episodic TO Episodic,
        uuid STRING,
        group_id STRING,
        created_at TIMESTAMP
    );
"""

#: graphiti's Kuzu full-text indexes (``graph_queries.get_fulltext_indices(GraphProvider.KUZU)``).
FULLTEXT_INDEXES = [
    "CALL CREATE_FTS_INDEX('Episodic', 'episode_content', ['content', 'source', 'source_description']);",
    "CALL CREATE_FTS_INDEX('Entity', 'node_name_and_summary', ['name', 'summary']);",
    "CALL CREATE_FTS_INDEX('Community', 'community_name', ['name']);",
    "CALL CREATE_FTS_INDEX('RelatesToNode_', 'edge_name_and_fact', ['name', 'fact']);",
]

#: graphiti's Kuzu edge return clause (``get_entity_edge_return_query(GraphProvider.KUZU)``), over e/n/m.
EDGE_RETURN = """
        e.uuid AS uuid,
        n.uuid AS source_node_uuid,
        m.uuid AS target_node_uuid,
        e.group_id AS group_id,
        e.created_at AS created_at,
        e.name AS name,
        e.fact AS fact,
        e.episodes AS episodes,
        e.expired_at AS expired_at,
        e.valid_at AS valid_at,
        e.invalid_at AS invalid_at,
        e.reference_time AS reference_time,
        e.attributes AS attributes
    """

#: graphiti's Kuzu entity return clause (``get_entity_node_return_query(GraphProvider.KUZU)``), over n.
NODE_RETURN = """
            n.uuid AS uuid,
            n.name AS name,
            n.group_id AS group_id,
            n.labels AS labels,
            n.created_at AS created_at,
            n.summary AS summary,
            n.attributes AS attributes
        """

#: graphiti's default ``sim_min_score`` of its hybrid search recipes (``search_utils.DEFAULT_MIN_SCORE``).
SIM_MIN_SCORE = 0.6
#: graphiti leaves a Kuzu full-text query out when it has more words than this (``search_utils.MAX_QUERY_LENGTH``).
MAX_QUERY_WORDS = 128


@dataclass(slots=True)
class Edge:
    """A fact as graphiti's ``EntityEdge`` reads it back (the fields the layer uses; no embedding)."""

    uuid: str
    source_node_uuid: str
    target_node_uuid: str
    name: str
    fact: str
    group_id: str
    episodes: list[str] = field(default_factory=list)
    created_at: datetime | None = None
    expired_at: datetime | None = None
    valid_at: datetime | None = None
    invalid_at: datetime | None = None
    reference_time: datetime | None = None
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Node:
    """An entity as graphiti's ``EntityNode`` reads it back (no embedding)."""

    uuid: str
    name: str
    group_id: str
    labels: list[str] = field(default_factory=list)
    created_at: datetime | None = None
    summary: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)


def _date(value: Any) -> datetime | None:
    """graphiti's ``parse_db_date`` for Kuzu (it hands back datetimes; a string is ISO 8601)."""
    if isinstance(value, str):
        return datetime.fromisoformat(value)
    return value


def edge_from_record(record: dict[str, Any]) -> Edge:
    """A row of :data:`EDGE_RETURN` (graphiti's ``get_entity_edge_from_record`` on Kuzu)."""
    return Edge(uuid=record["uuid"], source_node_uuid=record["source_node_uuid"],
                target_node_uuid=record["target_node_uuid"], name=record["name"], fact=record["fact"],
                group_id=record["group_id"], episodes=record["episodes"] or [],
                created_at=_date(record["created_at"]), expired_at=_date(record["expired_at"]),
                valid_at=_date(record["valid_at"]), invalid_at=_date(record["invalid_at"]),
                reference_time=_date(record.get("reference_time")),
                attributes=json.loads(record["attributes"]) if record["attributes"] else {})


def node_from_record(record: dict[str, Any]) -> Node:
    """A row of :data:`NODE_RETURN` (graphiti's ``get_entity_node_from_record`` on Kuzu)."""
    group_id = record.get("group_id") or ""
    labels = [label for label in (record.get("labels") or []) if label != "Entity_" + group_id.replace("-", "")]
    return Node(uuid=record["uuid"], name=record["name"], group_id=group_id, labels=labels,
                created_at=_date(record["created_at"]), summary=record["summary"],
                attributes=json.loads(record["attributes"]) if record["attributes"] else {})


def fulltext_text(query: str) -> str:
    """The text graphiti hands Kuzu's full-text index: the query itself, or nothing when it is too long."""
    return "" if len(query.split(" ")) > MAX_QUERY_WORDS else query


def rrf(results: list[list[str]], rank_const: int = 1) -> list[str]:
    """Reciprocal rank fusion, graphiti's (``search_utils.rrf``): ties keep first-seen order (a stable sort)."""
    scores: dict[str, float] = defaultdict(float)
    for result in results:
        for i, uuid in enumerate(result):
            scores[uuid] += 1 / (i + rank_const)
    ranked = sorted(scores.items(), key=lambda term: term[1], reverse=True)
    return [uuid for uuid, _score in ranked]
