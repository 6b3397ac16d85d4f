"""The layer contract: what a memory layer plugin implements."""

from __future__ import annotations

import abc
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .models import LayerHealth, Pointer, SearchResult, SectionConfig, StartupItems


class Layer(abc.ABC):
    """A memory layer: a store that can be searched and asked for its newest items.

    Subclasses set ``name`` (unique per entity, e.g. ``notes``) and implement the async
    methods. The core calls them concurrently with a per-layer timeout, so a slow or broken
    layer never fails a cross-layer call; raise freely, the caller reports it.
    """

    name: str = ""
    #: Label in the ambient recall manifest and section header.
    title: str = ""
    #: Results scoring below this are left out of ambient recall (semantic layers: a similarity floor).
    min_recall_score: float | None = None
    #: What this layer's backlog feeds, as the startup health line names it ("12 queued to the index").
    backlog_target: str | None = None
    #: Whether this layer's store belongs to one process at a time (an embedded file database). When no
    #: layer of an entity is exclusive (every store is a server), no owner lock is taken and any number of
    #: PPS processes serve the entity at once.
    exclusive: bool = True
    #: Home-relative paths this layer derives from its source of truth (an index): backups skip them and
    #: :meth:`reindex` rebuilds them after a restore.
    derived_paths: tuple[str, ...] = ()
    #: Whether this layer answers reads *at a glance*: :meth:`open_glance` opens it cheaply (no model, no heavy
    #: library, nothing started in the background) and for reading only, beside the process that owns the entity
    #: (its store takes other readers: SQLite in WAL mode, plain files). A short-lived reader that must answer at
    #: once while the owner starts (a cold Claude Code hook) opens a ``Memory(settings, glance=True)``: only these
    #: layers open; every other one is a :class:`WarmingLayer`, shown as still warming up. A glance never writes.
    glance: bool = False

    def __init__(self) -> None:
        self._latencies: list[float] = []

    async def open(self) -> None:  # noqa: B027 - optional
        """Open stores. Called once, before any other method."""

    async def close(self) -> None:  # noqa: B027 - optional
        """Release stores. Called once, at shutdown."""

    async def open_glance(self) -> None:
        """Open for reading only, beside the entity's owner (see :attr:`glance`); called instead of :meth:`open`,
        and :meth:`close` is called after. Raise when the store cannot be read that way now (it does not exist
        yet, its schema is older than this code): the layer is then shown as warming up."""
        raise NotImplementedError(f"layer {self.name!r} does not open at a glance")

    @abc.abstractmethod
    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        """Return up to ``limit`` results for a free-text query, best first.

        A layer may take keyword filters after ``offset`` (e.g. ``channel``), documented by the layer; they reach it
        through ``memory.search_layer(name, query, limit, offset, **filters)``, the one search path (rankers,
        latency)."""

    async def recent(self, limit: int) -> list[SearchResult]:
        """Return the ``limit`` newest items, oldest first. Layers without recency return []."""
        return []

    async def startup(self, count: int | None) -> StartupItems:
        """Items for this layer's startup section (``count`` None = all), with how many exist in all (the manifest
        says "2 of 7"). Defaults to ``recent(count)``; when that fills the section, ``recent`` of everything is
        counted for the total: a layer holding many items overrides this to count them without reading them."""
        items = await self.recent(count if count is not None else 1_000_000)
        if count is None or len(items) < count:
            return StartupItems(items=items, total=len(items))
        return StartupItems(items=items, total=len(await self.recent(1_000_000)))

    def default_sections(self) -> list[SectionConfig]:
        """The startup sections this layer contributes when ``[startup] sections`` does not replace them.

        Sections of every loaded layer are ordered by ``position`` (lower first). Default: none.
        """
        return []

    def left_out_call(self, section: SectionConfig, shown: int, total: int) -> Pointer | None:
        """The exact call that fetches what a budget left out of one of this layer's startup sections.

        ``shown`` of ``total`` items made it into the package. None (the default) lets recall point at the
        whole startup package instead.
        """
        return None

    def relevant(self, result: SearchResult) -> bool:
        """Whether a search result is a real match, worth showing in ambient recall.

        Semantic search always has a nearest neighbour; this keeps it out of the entity's context
        when it is no match. Default: ``score >= min_recall_score`` (all, when that is None).
        """
        return self.min_recall_score is None or result.score >= self.min_recall_score

    def backlog_text(self, key: str, count: int) -> str | None:
        """One of this layer's backlog counts (``LayerHealth.backlog``) as the startup health line shows it;
        None leaves it out. The kernel gives no key a meaning: the layer words its own backlog.

        Default: ``"<count> <key with spaces>"``, then ``to <backlog_target>`` if set, then
        :meth:`backlog_note` if any (``"12 queued to the index (reindex soon)"``); a zero count
        without a note is left out."""
        note = self.backlog_note(key, count)
        if not count and note is None:
            return None
        text = f"{count} {key.replace('_', ' ')}" + (f" to {self.backlog_target}" if self.backlog_target else "")
        return f"{text} {note}" if note else text

    def backlog_note(self, key: str, count: int) -> str | None:
        """The note beside one of this layer's backlog counts in the startup health line, e.g.
        ``(reindex soon)`` beside ``queued``; None (the default) for no note.

        Advise only what the user can do with this entity's configuration: thresholds and wording belong to
        the layer that knows what its backlog means."""
        return None

    @abc.abstractmethod
    async def health(self) -> LayerHealth:
        """Report availability, counts and backlog. Must not raise for an unavailable backend."""

    async def ready(self) -> str | None:
        """Readiness, beside liveness: None when this layer can serve calls now, else why not in one line
        (``"PostgreSQL is unreachable; try again shortly"``). ``/ready`` asks it, often: keep it cheap, and put
        no address or secret in it (anyone may read it). Default: ready once open."""
        return None

    # -- optional maintenance: derived indexes and consistent copies --------------------------

    async def reindex(self, progress: Callable[[int, int], None], full: bool = False) -> dict[str, Any] | None:
        """Rebuild this layer's derived indexes (vectors, a search index) from its source of truth.

        ``progress(done, total)`` may be called as work advances (``pps reindex`` draws a bar with it).
        ``full`` drops what is derived and rebuilds all of it; otherwise only what is missing or stale.
        Return a small JSON-able report; None (the default) means the layer has nothing to reindex.
        """
        return None

    async def snapshot(self, dest: Path) -> list[str] | None:
        """Write a consistent copy of this layer's files under ``dest`` while the layer stays open.

        For stores that cannot be copied as plain files while they are written (an embedded graph DB):
        pause this layer's writes, flush, copy to ``dest`` at the same paths they have under the entity's
        home, and return those home-relative paths; ``pps backup`` then takes them from ``dest`` and skips
        them in the home. None (the default): the layer's files can be copied as they are.
        """
        return None

    async def snapshot_counts(self, dest: Path) -> dict[str, int] | None:
        """After every layer's :meth:`snapshot` into ``dest``: this layer's counts as its copy holds them, for the
        manifest ``pps restore`` checks against. For a store other processes write to while the backup runs (a
        database server a fleet shares: a backup pauses only its own process's writes), counted in the same
        snapshot as the rows copied. None (the default): the counts of :meth:`health`, taken while this process's
        writes are paused."""
        return None

    async def check_restore(self, manifest: dict[str, Any]) -> None:  # noqa: B027 - optional
        """Called for every layer, open, before any layer's :meth:`after_restore`: raise a
        :class:`~pps_core.errors.PPSError` saying why when this layer's data would not land where the restore was
        told (a store bound by name to another database than the one the environment names): nothing is restored."""

    async def after_restore(self, manifest: dict[str, Any]) -> None:  # noqa: B027 - optional
        """Called once, open, after ``pps restore`` put this layer's files in a new home.

        ``manifest`` is the archive's (its ``entity`` is the name it was backed up under): a store keyed
        by the entity's name (a graph partition on a shared server) moves its data under the new name.
        """

    # -- latency bookkeeping shared by every layer --------------------------------------------

    def record_latency(self, started: float) -> None:
        self._latencies.append((time.perf_counter() - started) * 1000)
        del self._latencies[:-50]

    @property
    def recent_latency_ms(self) -> float | None:
        if not self._latencies:
            return None
        ordered = sorted(self._latencies)
        return round(ordered[len(ordered) // 2], 2)


class FailedLayer(Layer):
    """Stands in for a layer whose backend could not open: reported unavailable, never fatal."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__()
        self.name = name
        self.title = name
        self.reason = reason

    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        raise RuntimeError(f"layer {self.name} is unavailable: {self.reason}")

    async def health(self) -> LayerHealth:
        return LayerHealth(layer=self.name, available=False, detail=self.reason)


class WarmingLayer(FailedLayer):
    """Stands in, in a glance (``Memory(glance=True)``), for a layer that is not opened at a glance: it keeps the
    real layer's title and startup sections (so the package names what is missing) and is reported as warming
    up, not as broken."""

    def __init__(self, layer: Layer, reason: str = "") -> None:
        super().__init__(layer.name, reason or "warming up: it opens in the process that owns the entity")
        self.title = layer.title or layer.name
        self.layer = layer

    def default_sections(self) -> list[SectionConfig]:
        try:
            return self.layer.default_sections()
        except Exception:  # an unopened layer that needs its store for this: no section, still warming
            return []
