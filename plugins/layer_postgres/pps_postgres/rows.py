"""Rows of the turn store as PPS's turns and summaries (the columns read, and their mapping)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pps_core.timeutil import to_storage

COLUMNS = "id, message_id, content, author_name, channel, session_id, created_at, metadata, summary_id"
SUMMARY_COLUMNS = ("id, summary_text, start_id, end_id, message_count, channels, time_span_start, time_span_end, "
                   "summary_type, created_at, rewrite")


def ts(value: datetime | None) -> str | None:
    return None if value is None else to_storage(value)


def _loads(value: str | None) -> Any:
    if not value:
        return {}
    try:
        return json.loads(value)
    except ValueError:
        return {}


def row_to_turn(r: dict[str, Any]) -> dict[str, Any]:
    return {"id": r["id"], "message_id": r["message_id"], "content": r["content"], "author_name": r["author_name"],
            "channel": r["channel"], "session_id": r["session_id"], "created_at": ts(r["created_at"]),
            "metadata": _loads(r["metadata"]), "summary_id": r["summary_id"]}


def row_to_summary(r: dict[str, Any]) -> dict[str, Any]:
    return {"id": r["id"], "summary_text": r["summary_text"], "start_id": r["start_id"], "end_id": r["end_id"],
            "message_count": r["message_count"], "channels": json.loads(r["channels"] or "[]"),
            "time_span_start": ts(r["time_span_start"]), "time_span_end": ts(r["time_span_end"]),
            "summary_type": r["summary_type"], "created_at": ts(r["created_at"]), "rewrite": r["rewrite"]}
