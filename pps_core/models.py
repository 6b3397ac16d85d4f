"""Data that crosses layer and transport boundaries."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, InstanceOf


class Message(BaseModel):
    """One stored turn, verbatim."""

    id: int
    content: str
    author_name: str
    channel: str
    created_at: str = Field(description="UTC ISO-8601")
    session_id: str | None = None
    message_id: str | None = None
    summary_id: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Summary(BaseModel):
    """A summary of a set of turns; it marks exactly the turns it covers."""

    id: int
    summary_text: str
    start_id: int
    end_id: int
    message_count: int
    channels: list[str] = Field(default_factory=list)
    time_span_start: str | None = None
    time_span_end: str | None = None
    created_at: str


#: How ambient_recall renders an item (docs/plugin-hooks.md, "Rendering"): ``document`` (``[layer]``, its source,
#: its text), ``turn`` (one line: time, channel, author, text), ``summary`` (its day and channels, its text).
ItemKind = Literal["document", "turn", "summary"]


class SearchResult(BaseModel):
    """One item a layer returns from search, recent or startup.

    ``kind``, ``channels`` and ``author`` are the rendering contract: the kernel formats the item from them (and
    from ``timestamp``, ``content``, ``source``, ``layer``) and never from ``metadata``, which is the layer's own
    data for callers. They are not part of the item's JSON (``metadata`` carries what a caller needs)."""

    model_config = ConfigDict(extra="allow")

    layer: str
    content: str
    source: str = Field(description="where it came from: a file name, a turn id, a fact uuid")
    score: float = 0.0
    timestamp: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    kind: ItemKind = Field("document", exclude=True, description="how ambient_recall renders it")
    channels: list[str] = Field(default_factory=list, exclude=True,
                                description="a turn's channel, or the channels a summary covers: shown short, and "
                                            "a startup section's quotas split turns by the first")
    author: str | None = Field(None, exclude=True, description="who said it (a turn)")
    signals: dict[str, Any] | None = Field(
        None, exclude=True, description="how the layer made the score (its own signals): a caller sees them only "
                                        "when it asks (``explain``); an answer carries one score")


@dataclasses.dataclass(slots=True, kw_only=True)
class TurnItem:
    """One turn of a startup section, as a layer hands it in bulk: the fields the kernel renders a turn from and
    the item's JSON, without a validated :class:`SearchResult` per turn.

    The startup package shows every unsummarized turn (hundreds) at every session start; validating and dumping
    one pydantic model per turn was most of its cost (issue 26). A ``TurnItem`` is the same item as
    ``SearchResult(kind="turn", channels=[channel], author=author, ...)`` (:meth:`to_result`): rendered the same
    way, and :meth:`as_json` is that model's JSON. Nothing is validated: the layer vouches for the types (its
    store's rows) and that ``metadata`` is JSON data (str, int, float, bool, None, dicts with str keys, lists);
    the catalog still converts a result that is not plain JSON before it leaves (``catalog.to_jsonable``)."""

    layer: str
    content: str
    source: str  # the turn's id, as text
    timestamp: str | None
    channel: str
    author: str | None
    metadata: dict[str, Any]
    score: float = 0.0

    #: How ambient_recall renders it (the rendering contract of :class:`SearchResult`): always a turn.
    kind: ClassVar[Literal["turn"]] = "turn"

    @property
    def channels(self) -> list[str]:
        """The turn's channel, as :attr:`SearchResult.channels` holds it."""
        return [self.channel]

    def as_json(self) -> dict[str, Any]:
        """The item's JSON: what ``self.to_result().model_dump(mode="json")`` returns (same keys, same order), the
        ``metadata`` dict itself rather than a copy."""
        return {"layer": self.layer, "content": self.content, "source": self.source, "score": self.score,
                "timestamp": self.timestamp, "metadata": self.metadata}

    def to_result(self) -> SearchResult:
        """The same item as a validated :class:`SearchResult`."""
        return SearchResult(layer=self.layer, content=self.content, source=self.source, score=self.score,
                            timestamp=self.timestamp, metadata=self.metadata, kind="turn", channels=[self.channel],
                            author=self.author)


#: An item of a startup section: a :class:`SearchResult`, or a :class:`TurnItem` (turns handed in bulk). The
#: kernel renders both from the same fields (``kind``, ``channels``, ``author``, ``timestamp``, ``content``,
#: ``source``, ``layer``).
SectionItem = TurnItem | SearchResult


def item_json(item: SectionItem) -> dict[str, Any]:
    """An item's JSON as ``ambient_recall`` returns it in ``results``."""
    return item.as_json() if isinstance(item, TurnItem) else item.model_dump(mode="json")


class LayerHealth(BaseModel):
    """A layer's report: available or not, why, its counts and recent latency."""

    layer: str
    available: bool
    detail: str = ""
    counts: dict[str, int] = Field(default_factory=dict)
    backlog: dict[str, int] = Field(
        default_factory=dict,
        description="work waiting, by kind; the startup health line shows each as its layer words it (Layer.backlog_text)",
    )
    latency_ms: float | None = None
    #: Not failing: this process has not had the layer's first answer yet (a cold start loading its model or
    #: index) within ``[recall] warmup_timeout_s``; it answers from a later call.
    warming: bool = False


class Pointer(BaseModel):
    """The exact call that fetches something: ``{"operation": ..., "params": {...}}``."""

    operation: str
    params: dict[str, Any] = Field(default_factory=dict)


class StartupItems(BaseModel):
    """What a layer hands the startup package for one section."""

    items: Sequence[InstanceOf[TurnItem] | SearchResult] = Field(
        default_factory=list, description="oldest first; turns in bulk as TurnItems (no model validated per turn)")
    total: int | None = Field(None, description="how many exist in all, when more exist than were returned")
    more: Pointer | None = Field(None, description="the call that fetches every item of this section")
    older: Pointer | None = Field(
        None, description="the way back to items the caller will not be shown again (a moved read cursor)")


class SectionConfig(BaseModel):
    """One section of the startup package, filled from one layer.

    A layer contributes its default sections (:meth:`pps_core.Layer.default_sections`); ``[startup]`` in
    pps.toml can replace them (``sections``), add to them (``add``) or drop some (``omit``).
    """

    name: str = Field(description="label in the manifest, e.g. 'Crystals'")
    layer: str = Field(description="layer name")
    style: Literal["documents", "summaries", "turns"] = "documents"
    count: int | None = Field(None, ge=0, description="items to show; None = all")
    max_chars: int | None = Field(None, ge=1, description="truncate each item to this many characters")
    order: Literal["chronological", "newest_first"] = "chronological"
    quotas: dict[str, int] | None = Field(
        None, description="turns only: channel prefix -> turns always kept for it ('*' = any other) when a count "
                          "or a budget limits the section, so one busy channel never crowds out the rest")
    position: int = Field(50, description="where a default section goes in the package: lower comes first")


class LayerStatus(BaseModel):
    """How one layer fared in a cross-layer call."""

    layer: str
    #: ``warming``: not opened in this process yet (a glance: see ``Layer.glance``); it answers from a later call.
    status: Literal["ok", "error", "timeout", "unavailable", "warming"]
    detail: str = ""
    count: int = 0
    latency_ms: float = 0.0
