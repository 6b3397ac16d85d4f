"""Reading a host's JSON-lines log as it grows (standard library only: the hooks' fast path imports it)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def read_jsonl(path: Path, offset: int = 0) -> Iterable[tuple[int, dict[str, Any]]]:
    """Complete JSON lines of ``path`` from byte ``offset`` on, as (offset after the line, object). A last line
    without its newline is still being written: it is left for the next read. Lines that are not JSON objects are
    skipped."""
    with Path(path).open("rb") as fh:
        fh.seek(offset)
        pos = offset
        for raw in fh:
            if not raw.endswith(b"\n"):
                break
            pos += len(raw)
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if isinstance(entry, dict):
                yield pos, entry
