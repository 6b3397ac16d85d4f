"""anchor_save, anchor_search, anchor_list, anchor_delete, anchor_resync."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any

from pydantic import BaseModel, Field, field_validator

from pps_core import Operation
from pps_core.errors import InvalidParams, Unavailable
from pps_core.privacy import Captured, CapturedText

from .files import check_filename, check_title

LAYER = "core_anchors"


def _plain(check, value: str) -> str:
    try:
        return check(value)
    except InvalidParams as exc:
        raise ValueError(exc.message.split(": ", 1)[-1]) from None


class AnchorSaveParams(BaseModel):
    content: CapturedText = Field(..., min_length=1, max_length=200_000, description="the word-photo, in markdown")
    title: Captured = Field(..., min_length=1, max_length=200, description="its title; also names the file")
    location: Captured | None = Field(None, max_length=200,
                                      description="where it happened (e.g. 'terminal', 'kitchen')")
    tags: list[Captured] = Field(default_factory=list, max_length=50, description="a few words to group it by")
    date: str | None = Field(None, max_length=64, description="when it happened (ISO 8601; no zone = the entity's); "
                                                              "default now")

    @field_validator("title")
    @classmethod
    def _title(cls, v: str) -> str:
        return _plain(check_title, v)

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        out = [t.strip() for t in v if t.strip()]
        if any(len(t) > 64 for t in out):
            raise ValueError("each tag must be at most 64 characters")
        return out


class AnchorSearchParams(BaseModel):
    query: str = Field(..., min_length=1, max_length=4_000, description="what to look for, in plain words")
    limit: int = Field(10, ge=1, le=100)
    offset: int = Field(0, ge=0, le=10_000)

    @field_validator("query")
    @classmethod
    def _query(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v


class AnchorListParams(BaseModel):
    limit: int = Field(200, ge=1, le=1_000, description="most files listed, newest first")
    offset: int = Field(0, ge=0)


class AnchorDeleteParams(BaseModel):
    filename: str = Field(..., min_length=1, max_length=300, description="the file's name, e.g. 'first-snow.md'")
    forget: bool = Field(False, description="gone for good: no copy kept, and earlier deleted copies of this name "
                                            "removed too")

    @field_validator("filename")
    @classmethod
    def _filename(cls, v: str) -> str:
        return _plain(check_filename, v)


class AnchorGetParams(BaseModel):
    model_config = {"extra": "forbid"}
    filename: str = Field(..., min_length=1, max_length=300, description="the file's name, e.g. 'first-snow.md'")

    @field_validator("filename")
    @classmethod
    def _filename(cls, v: str) -> str:
        return _plain(check_filename, v)


class AnchorEditParams(AnchorGetParams):
    content: CapturedText = Field(..., min_length=1, max_length=200_000, description="the new markdown body")
    title: Captured | None = Field(None, min_length=1, max_length=200,
                                   description="a new title (the file keeps its name)")
    location: Captured | None = Field(None, max_length=200, description="a new location ('' removes it)")
    tags: list[Captured] | None = Field(None, max_length=50, description="new tags (omit to keep them)")

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else AnchorSaveParams._tags(v)

    @field_validator("title")
    @classmethod
    def _title(cls, v: str | None) -> str | None:
        return None if v is None else _plain(check_title, v)


class NoParams(BaseModel):
    model_config = {"extra": "forbid"}


def _indexed(layer_of: Callable[[], Any]) -> Any:
    """The entity's open word-photo layer with its index open, else Unavailable saying why."""
    try:
        layer = layer_of()
    except Unavailable as exc:
        raise Unavailable(f"word-photos are unavailable: {exc}") from None
    if getattr(layer, "index", None) is None:
        raise Unavailable("word-photos are unavailable: index is closed")
    return layer


async def anchor_save(layer_of, memory, p: AnchorSaveParams):
    limit = memory.settings.limits.max_content_chars
    if len(p.content) > limit:
        raise InvalidParams(f"anchor_save: content is {len(p.content)} characters; the limit is {limit}",
                            param="content")
    when = None
    if p.date is not None:
        from pps_core.timeutil import parse_timestamp

        when = parse_timestamp(p.date, memory.tz, "date")
    photo, not_indexed = await asyncio.to_thread(_indexed(layer_of).save, p.content, p.title, p.location, p.tags, when)
    out = {"saved": photo.filename, "title": photo.title, "date": photo.date, "chars": len(photo.body),
           "indexed": not_indexed is None}
    if not_indexed:
        out["detail"] = f"saved, but not searchable yet ({not_indexed}); it is indexed on a later search"
    return out


async def anchor_search(layer_of, memory, p: AnchorSearchParams):
    _indexed(layer_of)
    results = await memory.search_layer(LAYER, p.query, p.limit, p.offset)
    return {"query": p.query, "offset": p.offset, "count": len(results), "results": results}


async def anchor_list(layer_of, memory, p: AnchorListParams):
    photos, unreadable = await asyncio.to_thread(_indexed(layer_of).listing)
    return {"total": len(photos), "offset": p.offset, "word_photos": photos[p.offset:p.offset + p.limit],
            "unreadable": unreadable}


async def anchor_get(layer_of, memory, p: AnchorGetParams):
    from . import edit

    layer = _indexed(layer_of)
    if getattr(layer, "in_postgres", False):
        return await asyncio.to_thread(layer.get, p.filename)
    return await asyncio.to_thread(edit.read, layer, p.filename)


async def anchor_edit(layer_of, memory, p: AnchorEditParams):
    from . import edit

    limit = memory.settings.limits.max_content_chars
    if len(p.content) > limit:
        raise InvalidParams(f"anchor_edit: content is {len(p.content)} characters; the limit is {limit}",
                            param="content")
    layer = _indexed(layer_of)
    out, not_indexed = await asyncio.to_thread(layer.edit if getattr(layer, "in_postgres", False) else partial(edit.edit, layer),
                                               p.filename, p.content, p.title,
                                               p.tags, p.location)
    out["indexed"] = not_indexed is None
    if not_indexed:
        out["detail"] = f"saved, but not searchable yet ({not_indexed}); it is indexed on a later search"
    return out


async def anchor_delete(layer_of, memory, p: AnchorDeleteParams):
    kept = await asyncio.to_thread(_indexed(layer_of).delete, p.filename, p.forget)
    if kept is None:
        return {"deleted": p.filename, "forgotten": True, "kept_at": None}
    layer = _indexed(layer_of)
    return {"deleted": p.filename,
            "kept_at": kept if getattr(layer, "in_postgres", False) else f"{layer.settings.directory}/{kept}"}


async def anchor_resync(layer_of, memory, _p: NoParams):
    layer = _indexed(layer_of)
    changes = await asyncio.to_thread(layer.sync, True)
    photos, unreadable = await asyncio.to_thread(layer.listing)
    return {**changes, "unreadable": unreadable, "total": len(photos)}


def operations(layer_of: Callable[[], Any]) -> list[Operation]:
    """The word-photo operations, each run on ``layer_of()`` (the entity's open core_anchors layer)."""

    def h(handler):
        return partial(handler, layer_of)

    return [
        Operation("anchor_save", AnchorSaveParams, h(anchor_save), group="anchors", essential=True,
                  description="Save a word-photo: a markdown file in word_photos/ (named from the title, never "
                              "overwriting) with title, date, tags and location in its front matter; indexed at once."),
        Operation("anchor_search", AnchorSearchParams, h(anchor_search), group="anchors", read_only=True,
                  idempotent=True, description="Search the word-photos by meaning. Files edited by hand are "
                                               "re-indexed first."),
        Operation("anchor_list", AnchorListParams, h(anchor_list), group="anchors", essential=True, read_only=True, idempotent=True,
                  description="The word-photos, newest first (file name, title, date, tags), and any file that "
                              "could not be read."),
        Operation("anchor_delete", AnchorDeleteParams, h(anchor_delete), group="anchors", destructive=True,
                  description="Delete a word-photo by file name: removed from the index and moved to "
                              "word_photos/.deleted/; with forget=true gone for good (earlier deleted copies too)."),
        Operation("anchor_get", AnchorGetParams, h(anchor_get), group="anchors", essential=True, read_only=True, idempotent=True,
                  description="One word-photo by file name: title, date, tags, location and its markdown body."),
        Operation("anchor_edit", AnchorEditParams, h(anchor_edit), group="anchors", idempotent=True,
                  description="Rewrite a word-photo in place (same file name and date; title, tags and location "
                              "kept unless given), atomically; re-indexed at once."),
        Operation("anchor_resync", NoParams, h(anchor_resync), group="anchors", idempotent=True,
                  description="Re-read every word-photo and re-index the new, edited (by content hash) and "
                              "deleted ones; returns what changed."),
    ]
