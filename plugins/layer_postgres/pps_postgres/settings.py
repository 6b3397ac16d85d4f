"""``[postgres]`` in pps.toml, ``PPS_POSTGRES_*`` in the environment."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pps_core import PluginSettings
from pps_core.settings import checked_schema, database_schema


class PostgresSettings(PluginSettings, env_prefix="PPS_POSTGRES_"):
    dsn: str = Field("", description="libpq connection string or URI, e.g. postgresql://pps@db.example/pps "
                                     "(a password is better kept in PGPASSWORD or ~/.pgpass)")
    schema_name: str = Field("", alias="schema", max_length=63,
                             description="schema holding this entity's tables; default pps_<entity>")
    pool_min: int = Field(1, ge=0, le=100, description="connections kept open")
    pool_max: int = Field(8, ge=1, le=1000, description="connections at most, per PPS process")
    connect_timeout_s: float = Field(10.0, gt=0, description="how long opening the pool waits for the server")
    synchronous_commit: Literal["on", "off", "local", "remote_write", "remote_apply"] = Field(
        "on", description="PostgreSQL's synchronous_commit for PPS's sessions: 'on' (default) acknowledges a turn "
                          "after its WAL is flushed to disk; 'off' acknowledges sooner and may lose the last "
                          "~0.6 s of turns if the database server crashes (never corrupts)")
    hnsw_ef_search: int = Field(
        400, ge=10, le=1000, description="pgvector's hnsw.ef_search for a turn search: how many graph neighbours the "
                                         "HNSW index follows (at least the candidates the search asks for, 400 by "
                                         "default); higher is closer to exact and slower")
    hnsw_m: int = Field(16, ge=2, le=100, description="pgvector HNSW index: links per node (read when the index "
                                                      "is made; drop the idx_message_vectors_hnsw_* index to remake it)")
    hnsw_ef_construction: int = Field(64, ge=4, le=1000,
                                      description="pgvector HNSW index: candidate list size while building")
    index_build_memory_mb: int = Field(
        1024, ge=0, le=1_048_576, description="PostgreSQL's maintenance_work_mem (MB) for the session that makes an "
                                              "HNSW index: a build whose graph fits is 2x faster or more (about 2 KB "
                                              "per turn at 384 dimensions); 0: the server's own setting")
    auto_upgrade: bool = Field(
        False, description="a server that finds the entity's schema older than this PPS upgrades it as it starts "
                           "(for an entity with one server); false (default): it is not ready until `pps db upgrade "
                           "--entity NAME` has run (a new schema is created either way)")
    forget_rewrite: bool = Field(
        True, description="after forgetting, rewrite the turn tables (VACUUM FULL) so no table or index file keeps "
                          "the forgotten bytes; it locks those tables while it runs (seconds per 100,000 turns). "
                          "false: a plain VACUUM, quick, but the bytes stay in free space until reused")


def entity_schema(entity: str) -> str:
    """The default schema of an entity: :func:`pps_core.settings.database_schema`, the rule every layer kept in
    PostgreSQL follows."""
    return database_schema(entity)


def schema_for(settings: PostgresSettings, entity: str) -> str:
    """The turns' schema: ``[postgres] schema`` (or ``PPS_POSTGRES_SCHEMA``), else :func:`entity_schema`."""
    return checked_schema(settings.schema_name or entity_schema(entity), "postgres.schema")
