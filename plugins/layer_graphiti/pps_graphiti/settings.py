"""The graphiti plugin's own settings: ``[graphiti]`` in pps.toml, env ``PPS_GRAPHITI_*``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field, SecretStr, model_validator

from pps_core import PluginSettings, StorePath

if TYPE_CHECKING:  # pragma: no cover
    from pps_core.settings import EntitySettings


#: The embedded engines (Kuzu's dialect and files; each runs in an engine process of its own).
EMBEDDED = ("kuzu", "ladybug")


class GraphitiSettings(PluginSettings, env_prefix="PPS_GRAPHITI_"):
    driver: Literal["kuzu", "ladybug", "neo4j", "falkordb"] = Field(
        "kuzu", description="kuzu / ladybug = an embedded file in the entity's home (no server), run in an engine "
                            "process of its own; neo4j / falkordb = a server")
    path: StorePath | None = Field(None, description="the embedded database, relative to the entity's home; default "
                                                     "graphiti/graph.kuzu (kuzu) or graphiti/graph.lbug (ladybug)")
    engine_max_rss_mb: int = Field(1024, ge=0, description="kuzu / ladybug: the engine process is recycled (closed "
                                                           "and started afresh, between queries) once its memory "
                                                           "passes this; 0 = never")
    engine_buffer_pool_mb: int = Field(512, ge=0, description="kuzu / ladybug: the pages the engine may cache (0 = "
                                                              "the engine's default, 80% of the machine's memory); "
                                                              "below engine_max_rss_mb, so what the engine caches "
                                                              "never triggers a recycle, what it leaks does")
    engine_timeout_s: float = Field(60.0, ge=0, le=86400, description="kuzu / ladybug: a query the engine has not "
                                                                     "answered in this long counts as hung: the "
                                                                     "engine is stopped (the calls under way answer "
                                                                     "503) and the next call starts a fresh one; "
                                                                     "building indexes gets 10 times this; 0 = wait "
                                                                     "for ever")
    uri: str = Field("bolt://127.0.0.1:7687", description="Neo4j URI")
    user: str = Field("neo4j", description="Neo4j user")
    password: SecretStr = Field(SecretStr(""), description="Neo4j password")
    host: str = Field("127.0.0.1", description="FalkorDB host")
    port: int = Field(6379, ge=1, le=65535, description="FalkorDB port")
    falkordb_password: SecretStr | None = None
    group_id: str | None = Field(None, description="graph partition; default: the entity's name")
    min_free_mb: int = Field(16, ge=0, description="kuzu: writes are refused (503) while the graph's disk has "
                                                   "less free space than this, before Kuzu can fail half-way")
    compact_delay_s: float = Field(30.0, ge=0, le=3600, description="kuzu: a texture_delete has the graph's file "
                                                                    "compacted (deleted text leaves the disk) this "
                                                                    "long after the last one, and at close; a forget "
                                                                    "compacts before it returns")

    edge_overfetch: int = Field(20, ge=1, le=500, description="edges fetched from graphiti before ranking")
    node_limit: int = Field(5, ge=0, le=100, description="entity nodes texture_search returns")
    focal_entity: str | None = Field(None, description="whose point of view ranks the graph (facts near this entity "
                                                       "first); default: the entity's name")
    focal_ttl_s: float = Field(3600, ge=0, description="how long the focal entity's node uuid is cached")
    focal_depth: int = Field(2, ge=0, le=4, description="graph distance from the focal entity still rewarded")

    background_ingest: bool = Field(True, description="ingest captured turns in the background when an LLM is set")
    ingest_interval_s: float = Field(30.0, gt=0, description="worker wake-up interval (a stored turn also wakes it)")
    ingest_batch: int = Field(10, ge=1, le=500, description="turns the worker ingests per round")

    novelty_half_count: float = Field(5.0, gt=0, description="surfacings that halve a fact's weight")
    novelty_decay_days: float = Field(7.0, gt=0, description="a fact's surface count halves every this many days")
    novelty_settle_s: float = Field(60.0, ge=0, description="surfacings this close together count once (one turn)")

    @model_validator(mode="after")
    def _default_path(self) -> GraphitiSettings:
        if self.path is None:
            self.path = "graphiti/graph.lbug" if self.driver == "ladybug" else "graphiti/graph.kuzu"
        return self

    @property
    def embedded(self) -> bool:
        """An embedded graph file in the entity's home (Kuzu or LadybugDB), not a graph server."""
        return self.driver in EMBEDDED

    @property
    def db_file(self) -> str:
        return str(self.path)

    def focal(self, settings: EntitySettings) -> str:
        """The focal entity: ``[graphiti] focal_entity``, else a top-level ``focal_entity`` (pps.toml written before
        it moved here), else the entity's name."""
        older = (settings.model_extra or {}).get("focal_entity")
        return self.focal_entity or (older if isinstance(older, str) and older.strip() else None) or settings.entity

    def resolved_group_id(self, entity: str) -> str:
        """graphiti accepts only letters, digits, '-' and '_' in a group id. A name that had to be
        changed gets a short hash of the original, so 'lyra.x' and 'lyra_x' never share a partition
        on a shared Neo4j or FalkorDB."""
        name = self.group_id or entity
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", name)
        if safe != name:
            import hashlib

            safe = f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
        return safe


#: What a graph operation that needs an LLM answers when none is configured (here, not in clients.py, so that
#: reading it never imports graphiti_core).
NO_LLM = ("rich_texture: this needs an LLM, and none is configured; set [llm] base_url and model in the "
          "entity's pps.toml (or PPS_LLM__BASE_URL / PPS_LLM__MODEL). Nothing was changed.")
