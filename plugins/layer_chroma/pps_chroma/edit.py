"""Reading one word-photo and editing it in place (the explorer's editor; anchor_get, anchor_edit)."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from pps_core.atomic import atomic_write, link_problem
from pps_core.errors import InvalidParams, NotFound
from pps_core.timeutil import now_utc

from .files import Unreadable, check_filename, check_title, read_photo, render


def _path(layer, filename: str, op: str):
    name = check_filename(filename)
    path = layer.dir / name
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise NotFound(f"{op}: no word-photo named {name!r}", param="filename") from None
    problem = link_problem(st)
    if problem:  # never read or written through: it may name a file outside the folder
        raise InvalidParams(f"{op}: {name} is {problem}", param="filename")
    return path


def read(layer, filename: str) -> dict[str, Any]:
    """The file's fields and its markdown body, as stored."""
    with layer._lock:
        path = _path(layer, filename, "anchor_get")
        try:
            photo = read_photo(path, layer.memory.tz)
        except Unreadable as exc:
            raise NotFound(f"anchor_get: {path.name} cannot be read ({exc})", param="filename") from None
    return {"filename": photo.filename, "title": photo.title, "date": photo.date, "tags": photo.tags,
            "location": photo.location, "content": photo.body, "sha256": photo.sha256,
            **({"warning": photo.warning} if photo.warning else {})}


def edit(layer, filename: str, content: str, title: str | None, tags: list[str] | None,
         location: str | None) -> tuple[dict[str, Any], str | None]:
    """Replace the file atomically (same name, same date unless it had none), then re-index it; when the text
    changed, the index is written afresh (:meth:`ChromaIndex.rewrite`): the replaced text leaves its files."""
    with layer._lock:
        path = _path(layer, filename, "anchor_edit")
        try:
            old = read_photo(path, layer.memory.tz)
            when = datetime.fromisoformat(old.date.replace("Z", "+00:00")) if old.date else now_utc()
        except (Unreadable, ValueError):
            old, when = None, now_utc()
        new_title = check_title(title) if title is not None else (old.title if old else path.stem)
        new_tags = tags if tags is not None else (old.tags if old else [])
        new_location = location if location is not None else (old.location if old else None)
        atomic_write(path, render(new_title, content, when, new_tags, new_location or None))
        st = path.stat()
        photo = read_photo(path, layer.memory.tz)
        out = {"edited": photo.filename, "title": photo.title, "date": photo.date, "chars": len(photo.body)}
        replaced = old is None or old.sha256 != photo.sha256
        try:
            layer._index([(photo, (st.st_mtime_ns, st.st_size, st.st_ino))])
        except Exception as exc:  # the file is the truth; the index catches up on a later read
            return out, f"{type(exc).__name__}: {exc}"
        layer._save_state()
        if replaced:  # Chroma's log and free pages still hold the replaced text: the index is written afresh,
            layer.index.rewrite()  # as anchor_delete(forget=true) has it
            layer._save_state()
        return out, None
