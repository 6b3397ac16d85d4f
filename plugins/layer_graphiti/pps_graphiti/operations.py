"""texture_* operations and graph ingestion, for every transport."""

from __future__ import annotations

import asyncio
import uuid as uuidlib
from functools import partial

from pydantic import BaseModel, Field, field_validator

from pps_core import Operation
from pps_core.privacy import PRIVATE_ONLY, Captured
from pps_core.timeutil import now_utc, parse_timestamp, to_storage


def _clean(v: str | None) -> str | None:
    if v is None:
        return None
    if "\x00" in v:
        raise ValueError("must not contain NUL characters")
    v = v.strip()
    if not v:
        raise ValueError("must not be blank")
    return v


class TextureSearchParams(BaseModel):
    query: str = Field(..., min_length=1, max_length=2000, description="what to look for")
    limit: int = Field(10, ge=1, le=100, description="facts (edges) to return")
    offset: int = Field(0, ge=0, le=10_000, description="facts to skip (pagination)")
    node_limit: int | None = Field(None, ge=0, le=100, description="entities (nodes) to return; default from config")

    _q = field_validator("query")(classmethod(lambda cls, v: _clean(v)))


class ExploreParams(BaseModel):
    entity_name: str = Field(..., min_length=1, max_length=500)
    depth: int = Field(2, ge=1, le=4, description="hops from the entity")
    limit: int = Field(100, ge=1, le=1000, description="most facts returned")

    _n = field_validator("entity_name")(classmethod(lambda cls, v: _clean(v)))


class EntitiesParams(BaseModel):
    limit: int = Field(50, ge=1, le=1000, description="entities to return")
    offset: int = Field(0, ge=0, le=100_000, description="entities to skip (pagination)")


class TimelineParams(BaseModel):
    since: str = Field("24h", max_length=100, description="ISO 8601 (entity's zone if naive) or '24h', '7d'")
    until: str | None = Field(None, max_length=100, description="ISO 8601 or a duration ago; default now")
    limit: int = Field(50, ge=1, le=1000)


class FactsParams(BaseModel):
    model_config = {"extra": "forbid"}
    limit: int = Field(500, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=10_000_000)


def _captured(v: str | None) -> str | None:
    if v == PRIVATE_ONLY:
        raise ValueError("nothing is left once its <private> spans are dropped")
    return v


class AddParams(BaseModel):
    """Captured text: its ``<private>`` spans are dropped (pps_core.privacy) before it is stored or sent to the
    LLM."""

    content: Captured = Field(..., min_length=1, max_length=100_000, description="text to extract facts from (LLM)")
    channel: Captured | None = Field(None, max_length=200, description="where it came from")

    _c = field_validator("content")(classmethod(lambda cls, v: _captured(_clean(v))))


class TripletParams(BaseModel):
    """Captured text: ``<private>`` spans are dropped from the names and the fact before anything is stored."""

    source: Captured = Field(..., min_length=1, max_length=500, description="subject entity (reused by exact name)")
    relationship: Captured = Field(..., min_length=1, max_length=200, description="e.g. WORKS_ON")
    target: Captured = Field(..., min_length=1, max_length=500, description="object entity (reused by exact name)")
    fact: Captured | None = Field(None, max_length=10_000,
                                  description="the fact in words; default built from the triplet")
    source_type: str | None = Field(None, max_length=100, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    target_type: str | None = Field(None, max_length=100, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    valid_at: str | None = Field(None, max_length=100, description="when it became true (ISO 8601); default now")

    _s = field_validator("source", "relationship", "target", "fact")(
        classmethod(lambda cls, v: _captured(_clean(v))))


def _uuid(v: str) -> str:
    """A uuid, checked with the parameters (before any store opens: a serverless call answers at once)."""
    try:
        return str(uuidlib.UUID(v.strip()))
    except ValueError:
        raise ValueError(f"{v!r} is not a uuid (texture_search shows each fact's uuid)") from None


class DeleteParams(BaseModel):
    uuid: str = Field(..., min_length=1, max_length=100, description="a fact's, entity's or episode's uuid")

    _u = field_validator("uuid")(classmethod(lambda cls, v: _uuid(v)))


class IngestParams(BaseModel):
    batch_size: int = Field(20, ge=1, le=500, description="turns to ingest now")


class NoParams(BaseModel):
    model_config = {"extra": "forbid"}


async def texture_search(layer_of, memory, p: TextureSearchParams):
    layer = layer_of()
    n = layer.settings.node_limit if p.node_limit is None else p.node_limit
    edges, nodes = await asyncio.gather(memory.search_layer(layer.name, p.query, p.limit, p.offset),
                                        layer.search_nodes(p.query, n, p.offset))
    results = [r.model_dump(mode="json") for r in edges + nodes]
    return {"query": p.query, "count": len(results), "edges": len(edges), "nodes": len(nodes), "results": results}


async def texture_explore(layer_of, memory, p: ExploreParams):
    from .reads import explore

    return await explore(layer_of(), p.entity_name, p.depth, p.limit)


async def texture_entities(layer_of, memory, p: EntitiesParams):
    graph = layer_of().require()
    total = (await graph.counts())["entities"]
    entities = await graph.entities_by_facts(p.limit, p.offset) if p.offset < total else []
    return {"count": len(entities), "offset": p.offset, "total": total, "entities": entities}


async def texture_timeline(layer_of, memory, p: TimelineParams):
    from .reads import timeline

    since = parse_timestamp(p.since, memory.tz, "since", relative=True)
    until = parse_timestamp(p.until, memory.tz, "until", relative=True) if p.until else now_utc()
    return await timeline(layer_of(), since, until, p.limit)


async def texture_facts(layer_of, memory, p: FactsParams):
    from .reads import all_facts

    return await all_facts(layer_of(), p.offset, p.limit)


async def texture_add(layer_of, memory, p: AddParams):
    from graphiti_core.nodes import EpisodeType

    now = now_utc()
    result = await layer_of().ingestor.add_episode(f"note {to_storage(now)}", p.content, p.channel or "texture_add",
                                                       now, EpisodeType.text)
    return {"episode": result.episode.uuid, "entities": [n.name for n in result.nodes],
            "facts": [{"uuid": e.uuid, "fact": e.fact} for e in result.edges]}


async def texture_add_triplet(layer_of, memory, p: TripletParams):
    from .writes import add_triplet

    valid = parse_timestamp(p.valid_at, memory.tz, "valid_at") if p.valid_at else None
    return await add_triplet(layer_of(), p.source, p.relationship, p.target, p.fact, p.source_type,
                             p.target_type, valid)


async def texture_delete(layer_of, memory, p: DeleteParams):
    from .writes import delete

    return await delete(layer_of(), p.uuid)


async def graphiti_ingestion_stats(layer_of, memory, _p: NoParams):
    return await layer_of().ingestor.stats()


async def ingest_batch_to_graphiti(layer_of, memory, p: IngestParams):
    return await layer_of().ingestor.ingest_batch(p.batch_size)


def operations(layer_of) -> list[Operation]:
    """The graph's operations, each run on ``layer_of()`` (the entity's open rich_texture layer, else
    Unavailable saying why)."""

    from pps_core.contracts import IngestionQueue

    from .layer import GraphitiLayer

    def h(handler):
        return partial(handler, layer_of)

    g = "texture"
    return [
        Operation("texture_search", TextureSearchParams, h(texture_search), group=g, essential=True, read_only=True,
                  description="Search the knowledge graph: facts (edges, hybrid BM25 + vector, ranked toward the "
                              "focal entity, fresh and varied facts first) then entities (nodes). Each result has "
                              "metadata.kind 'edge' or 'node' and its uuid as source."),
        Operation("texture_explore", ExploreParams, h(texture_explore), group=g, read_only=True, idempotent=True,
                  description="The neighbourhood of an entity: facts and entities up to `depth` hops away."),
        Operation("texture_entities", EntitiesParams, h(texture_entities), group=g, read_only=True, idempotent=True,
                  description="The graph's entities, the most connected first, each with how many facts touch it."),
        Operation("texture_timeline", TimelineParams, h(texture_timeline), group=g, read_only=True, idempotent=True,
                  description="Facts that became valid between `since` and `until` (ISO or '24h'/'7d'), oldest first."),
        Operation("texture_facts", FactsParams, h(texture_facts), group=g, read_only=True, idempotent=True,
                  description="Every fact of the graph, oldest first, a page at a time (for an export): subject, "
                              "predicate, object, fact, valid_at, invalid_at, created_at and how many episodes "
                              "(ingested turns or notes) it was extracted from (0: added directly)."),
        Operation("texture_add", AddParams, h(texture_add), group=g,
                  description="Add text to the graph; the configured LLM extracts entities and facts."),
        Operation("texture_add_triplet", TripletParams, h(texture_add_triplet), group=g, idempotent=True,
                  description="Add one fact (source -relationship-> target) directly, without an LLM. Entities "
                              "are reused by exact name."),
        Operation("texture_delete", DeleteParams, h(texture_delete), group=g, destructive=True, idempotent=True,
                  description="Delete a fact, an entity (with its facts) or an episode (with the facts and "
                              "entities only it gave the graph) by uuid; the entities' summaries lose it too."),
        Operation("graphiti_ingestion_stats", NoParams, h(graphiti_ingestion_stats), group="graph ingest",
                  read_only=True, idempotent=True, reads=(GraphitiLayer, IngestionQueue),  # the queue: the turns
                  description="How many captured turns wait to be ingested into the graph, and the worker's state."),
        Operation("ingest_batch_to_graphiti", IngestParams, h(ingest_batch_to_graphiti), group="graph ingest",
                  description="Ingest the oldest uningested turns into the graph now (needs the configured LLM). "
                              "While another server of the entity is ingesting, answers ingested 0 with a note."),
    ]
