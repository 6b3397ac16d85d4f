"""Test helpers for the SQLite store: the load generator's audit, read from the file itself."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from pps_turns.loadgen import Tally, audit_rows


def audit(db: Path, tally: Tally) -> dict[str, Any]:
    """Read the store itself and check every promise (``pps_turns.loadgen.audit_rows``)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT id, message_id, summary_id FROM messages").fetchall()
        summaries = conn.execute("SELECT id, start_id, end_id, message_count FROM message_summaries "
                                 "ORDER BY start_id").fetchall()
    finally:
        conn.close()
    return audit_rows(rows, summaries, tally)
