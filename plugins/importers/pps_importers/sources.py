"""Reading an export: a ``.zip`` as the service sends it, or the ``conversations.json`` inside it."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any


class ExportError(ValueError):
    """The file is not the export it was said to be; the message names the file and what is wrong."""


def load_conversations(path: Path, what: str) -> list[dict[str, Any]]:
    """The list of conversations of an export (``what`` names the service in errors)."""
    path = Path(path)
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.rsplit("/", 1)[-1] == "conversations.json"]
            if not names:
                raise ExportError(f"{path}: no conversations.json in this zip (is it a {what} export?)")
            name = min(names, key=lambda n: n.count("/"))  # the one at the top, if several
            with zf.open(name) as fh:
                data = _parse(fh.read(), f"{path}:{name}")
            where = f"{path}:{name}"
    else:
        data = _parse(path.read_bytes(), str(path))
        where = str(path)
    if isinstance(data, dict) and isinstance(data.get("conversations"), list):
        data = data["conversations"]
    if not isinstance(data, list) or not all(isinstance(c, dict) for c in data):
        raise ExportError(f"{where}: not a {what} export (expected a JSON list of conversations)")
    return data


def _parse(raw: bytes, where: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ExportError(f"{where}: not JSON ({exc})") from None
