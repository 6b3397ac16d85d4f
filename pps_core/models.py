"""Data that crosses layer and transport boundaries."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


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


class Pointer(BaseModel):
    """The exact call that fetches something: ``{"operation": ..., "params": {...}}``."""

    operation: str
    params: dict[str, Any] = Field(default_factory=dict)


class StartupItems(BaseModel):
    """What a layer hands the startup package for one section."""

    items: list[SearchResult] = Field(default_factory=list)
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
