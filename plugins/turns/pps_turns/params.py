"""Parameter models of the turn operations: every bound checked, every error naming its parameter."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pps_core.privacy import Captured, CapturedMetadata

MAX_LIMIT = 1000


def _clean_text(v: str, what: str = "value") -> str:
    if "\x00" in v:
        raise ValueError("must not contain NUL characters")
    return v


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TurnIn(_Params):
    content: Captured = Field(..., min_length=1, max_length=200_000,
                              description="the turn, verbatim (<private>...</private> spans dropped)")
    author_name: Captured = Field(..., min_length=1, max_length=200, description="who said it")
    channel: Captured = Field(..., min_length=1, max_length=200,
                              description="e.g. 'terminal:<session>', 'discord:<room>'")
    session_id: Captured | None = Field(None, max_length=200)
    created_at: str | None = Field(None, max_length=64,
                                   description="ISO 8601; without a zone it is read in the entity's zone; default now")
    metadata: CapturedMetadata | None = Field(None, description="any JSON object, kept with the turn "
                                                                "(<private> spans dropped from every string)")
    message_id: Captured | None = Field(None, min_length=1, max_length=200,
                                   description="client id: a repeat with the same id stores nothing new")

    @field_validator("content")
    @classmethod
    def _content(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return _clean_text(v)

    @field_validator("author_name", "channel")
    @classmethod
    def _names(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        if any(ord(ch) < 32 for ch in v):
            raise ValueError("must not contain control characters")
        return v.strip()

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None and len(json.dumps(v, ensure_ascii=False, default=str)) > 65_536:
            raise ValueError("must be at most 64 KiB of JSON")
        return v


class StoreMessagesParams(_Params):
    messages: list[TurnIn] = Field(..., min_length=1, max_length=MAX_LIMIT,
                                   description="turns to store, in one transaction")


class SearchParams(_Params):
    query: str = Field(..., min_length=1, max_length=10_000, description="natural-language text; no syntax needed")
    limit: int = Field(10, ge=1, le=100)
    offset: int = Field(0, ge=0, le=100_000)
    channel: str | None = Field(None, max_length=200, description="only turns of this channel (raw_search)")
    min_score: float | None = Field(None, ge=0.0, le=1.0,
                                    description="the floor: only results whose calibrated score (the probability "
                                                "that it is relevant) is at least this; default the layer's "
                                                "[recall] min_score; 0 lists every candidate")
    explain: bool = Field(False, description="add each result's scoring signals")


class SummarizeParams(_Params):
    limit: int = Field(50, ge=1, le=MAX_LIMIT, description="how many of the oldest unsummarized turns")


class StoreSummaryParams(_Params):
    summary_text: Captured = Field(..., min_length=1, max_length=100_000)
    start_id: int | None = Field(None, ge=1, description="first turn id of the range (with end_id)")
    end_id: int | None = Field(None, ge=1, description="last turn id of the range (with start_id)")
    message_ids: list[int] | None = Field(None, min_length=1, max_length=10_000,
                                          description="exactly the turns covered (preferred over a range)")
    channels: list[Captured] | None = Field(None, max_length=100)
    summary_type: Captured = Field("work", min_length=1, max_length=50)
    created_at: str | None = Field(None, max_length=64,
                                   description="when the summary was written (ISO 8601; without a zone it is read in "
                                               "the entity's zone): `pps import pps` keeps an export's; default now")

    @field_validator("summary_text")
    @classmethod
    def _text(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return _clean_text(v)

    @field_validator("message_ids")
    @classmethod
    def _ids(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and any(i < 1 for i in v):
            raise ValueError("ids are positive integers")
        return v

    @model_validator(mode="after")
    def _range_or_ids(self):
        if not self.message_ids and (self.start_id is None or self.end_id is None):
            raise ValueError("give message_ids, or both start_id and end_id")
        return self


class LimitParams(_Params):
    limit: int = Field(5, ge=1, le=MAX_LIMIT)
    offset: int = Field(0, ge=0, le=1_000_000)


class NoParams(_Params):
    pass


class TurnsSinceSummaryParams(_Params):
    limit: int = Field(50, ge=1, le=MAX_LIMIT)
    offset: int = Field(0, ge=0, le=10_000_000, description="skip this many (counted from the newest)")
    channel: str | None = Field(None, max_length=200)
    oldest_first: bool = Field(False, description="page from the oldest instead of the newest")


class ConversationContextParams(_Params):
    turns: int = Field(..., ge=0, le=100_000, description="how many turns of context (summaries count ~50 each)")


class TurnsSinceParams(_Params):
    timestamp: str = Field(..., min_length=1, max_length=64, description="ISO 8601, e.g. 2026-01-26T07:30:00")
    include_summaries: bool = True
    limit: int = Field(1000, ge=1, le=10_000)


class TurnsAroundParams(_Params):
    timestamp: str = Field(..., min_length=1, max_length=64, description="ISO 8601 centre point")
    count: int = Field(40, ge=0, le=MAX_LIMIT)
    before_ratio: float = Field(0.5, description="share of turns before the centre; clamped to [0, 1]")


class PollParams(_Params):
    consumer_key: Captured = Field(..., min_length=1, max_length=200, description="the reader: one cursor per key")
    channel: str | None = Field(None, max_length=200, description="the reader's own channel (excluded)")
    limit: int = Field(50, ge=1, le=MAX_LIMIT)


# -- browsing (list_turns, turn_activity) --------------------------------------------------


class ListTurnsParams(_Params):
    since: str | None = Field(None, max_length=64, description="from this moment (ISO 8601; no zone = entity's zone)")
    until: str | None = Field(None, max_length=64, description="before this moment")
    channel: str | None = Field(None, max_length=200,
                                description="this channel, or every channel under it ('terminal' = 'terminal:*')")
    author: str | None = Field(None, max_length=200, description="this author (case-insensitive)")
    ids: list[int] | None = Field(None, min_length=1, max_length=1000, description="only these turn ids")
    newest_first: bool = False
    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0, le=1_000_000)


class ActivityParams(_Params):
    days: int = Field(30, ge=1, le=366, description="how many days, ending with the day of `until`")
    until: str | None = Field(None, max_length=64, description="the last day's moment (default now)")


# -- forgetting ------------------------------------------------------------------------------


class _Who(_Params):
    requested_by: Captured = Field("unspecified", min_length=1, max_length=200,
                              description="who asked to forget (kept in the forget log; never the content)")


class ForgetTurnsParams(_Who):
    ids: list[int] = Field(..., min_length=1, max_length=MAX_LIMIT, description="turn ids to delete for good")

    @field_validator("ids")
    @classmethod
    def _ids(cls, v: list[int]) -> list[int]:
        if any(i < 1 for i in v):
            raise ValueError("ids are positive integers")
        return v


class ForgetRangeParams(_Who):
    channel: str = Field(..., min_length=1, max_length=200,
                         description="this channel, or every channel under it ('terminal' = 'terminal:*')")
    since: str = Field(..., min_length=1, max_length=64, description="from this moment (ISO 8601; no zone = entity's)")
    until: str = Field(..., min_length=1, max_length=64, description="up to (not including) this moment")


class ForgetSearchParams(_Who):
    query: str = Field(..., min_length=1, max_length=10_000,
                       description="words to find: a turn matches when it contains one of them (stop words aside)")
    channel: str | None = Field(None, max_length=200, description="only turns of this channel")
    limit: int = Field(20, ge=1, le=100, description="at most this many matches")
    min_score: float | None = Field(None, ge=0.0, le=1.0,
                                    description="only matches whose calibrated score is at least this; default "
                                                "raw_capture's [recall] min_score; 0 lists every turn holding a "
                                                "word of the query")
    confirm: str | None = Field(None, max_length=100,
                                description="the token the first call returned: deletes exactly the turns it listed")


class ForgetLogParams(_Params):
    limit: int = Field(20, ge=1, le=MAX_LIMIT)
    offset: int = Field(0, ge=0, le=1_000_000)
