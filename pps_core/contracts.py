"""What one plugin's layer may offer another, found by capability (``memory.find(Contract)``), never by name.

Each contract is a runtime-checkable Protocol: a layer fills it by having the methods; nothing to register.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from .models import Message, StartupItems


@runtime_checkable
class IngestionQueue(Protocol):
    """A store that queues captured turns for a derived store (a knowledge graph) to ingest."""

    async def pending_ingestion(self, limit: int) -> list[Message]:
        """The oldest turns not yet ingested, oldest first."""
        ...

    async def mark_ingested(self, ids: list[int]) -> int:
        """Mark turns ingested; returns how many changed."""
        ...

    async def count_uningested(self) -> int:
        """How many turns wait."""
        ...


@runtime_checkable
class UnreadSource(Protocol):
    """A store with per-reader cursors: what other channels said since a reader last looked."""

    async def unread_for_recall(self, consumer_key: str, channel: str | None) -> StartupItems | None:
        """A preview of unread turns (newest), their total and ``more``/``older`` pointers; None if none."""
        ...


class SummaryBatch(BaseModel):
    """Turns handed out to be summarized, oldest first."""

    ids: list[int] = Field(default_factory=list)
    transcript: str = ""
    unsummarized: int = Field(0, description="unsummarized turns before this batch is stored")


class SummaryReceipt(BaseModel):
    id: int
    message_count: int


@runtime_checkable
class SummarizableStore(Protocol):
    """A store whose oldest turns can be summarized (upkeep drives it with an LLM)."""

    async def unsummarized_count(self) -> int:
        ...

    async def next_to_summarize(self, limit: int) -> SummaryBatch:
        """The oldest unsummarized turns (by time), at most ``limit``."""
        ...

    async def save_summary(self, text: str, ids: list[int]) -> SummaryReceipt:
        """Store a summary that marks exactly ``ids``."""
        ...


@runtime_checkable
class JobClaims(Protocol):
    """A store several servers share that hands a named background job to one of them at a time (issue 37: a
    fleet of servers on one entity). Plugins do not call it: they use :meth:`pps_core.Memory.claim`."""

    def claim_job(self, job: str) -> AbstractAsyncContextManager[bool]:
        """An async context: True inside it in exactly one process at a time of all that serve the entity (held
        until the block ends, or the process dies), False in every other one (which then skips the job)."""
        ...


@runtime_checkable
class SharedValues(Protocol):
    """A store several servers share that keeps a few small values all of them read (the token's digest, so a
    token rotated on one server is refused by every one). ``shared_get`` answers None for a key never put."""

    async def shared_get(self, key: str) -> str | None:
        ...

    async def shared_put(self, key: str, value: str) -> None:
        ...


@runtime_checkable
class FocalGraph(Protocol):
    """A graph of entities seen from one of them, the focal entity (facts near it rank first): a view of the graph
    (the explorer's graph page) starts there. Any graph layer fills it; the graph plugin's own setting stays its
    own (``[graphiti] focal_entity``)."""

    @property
    def focal_name(self) -> str:
        """The focal entity's name (a graph layer defaults it to the entity's name)."""
        ...


@runtime_checkable
class PrunableSharedValues(Protocol):
    """A :class:`SharedValues` store that also forgets values (the explorer's shared logins, once ended or expired)."""

    async def shared_prune(self, prefix: str, older_than_s: float) -> int:
        """Remove the values whose key starts with ``prefix`` and that are empty or were last put more than
        ``older_than_s`` seconds ago; answers how many went."""
        ...


@runtime_checkable
class Ingester(Protocol):
    """A store that ingests queued turns (from an :class:`IngestionQueue`) when asked."""

    async def ingest_pending(self) -> dict[str, Any]:
        """Ingest one batch; returns a small JSON report."""
        ...


@runtime_checkable
class OwedForgets(Protocol):
    """A turn store that records the copies a forget still owes (:mod:`pps_core.lineage`) and retries them: the
    memory retries them when it opens, upkeep on its rounds; ``pps_health`` and ``turn_copies`` show them."""

    async def owed_forgets(self) -> list[dict[str, Any]]:
        """Every forget still owed, oldest first: ``{"id", "forgotten_at", "turns": how many, "copies": [keys of
        the copies that still owe it]}``. Never text."""
        ...

    async def settle_owed_forgets(self) -> dict[str, Any]:
        """Run every owed copy's forget again, striking off those that confirm: ``{"settled": forgets finished,
        "owed": forgets still owed, "pending": {copy key: forgets it owes}, "incomplete": [why, never text]}``."""
        ...
