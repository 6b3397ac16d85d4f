"""``pps export DIR``: an entity's memory as open files another tool can read, and ``pps import pps`` reads back.

Everything is read through the entity's operations (its server's, when one runs), never from its stores, so
any store plugin that offers the operations exports the same way. The format is documented in
docs/export-format.md; ``FORMAT_VERSION`` changes when a reader would have to.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pps_core.errors import UnknownOperation
from pps_core.progress import progress
from pps_core.timeutil import now_utc, to_storage

FORMAT = "pps-export"
FORMAT_VERSION = 1
PAGE = 500


class ExportRefused(Exception):
    """The export cannot be written where asked; nothing was written."""


def _private_file(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def _line(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False) + "\n"


def _call(client, name: str, params: dict[str, Any]) -> Any | None:
    """An operation's answer, or None when the entity does not have it (its plugin is not loaded)."""
    try:
        return client.call(name, params)
    except UnknownOperation:
        return None


def iter_turns(client, bar) -> Iterator[dict[str, Any]]:
    """Every turn in time order, a page at a time: by ``since`` (the last page's newest time) and an offset among
    turns of that very time, so a history of any length pages without a growing offset."""
    since, skip = None, 0
    while True:
        params: dict[str, Any] = {"limit": PAGE, "offset": skip}
        if since:
            params["since"] = since
        page = client.call("list_turns", params)
        turns = page["turns"]
        if bar.total is None:
            bar.total = page["total"]
        yield from turns
        bar.update(len(turns))
        if len(turns) < PAGE:
            return
        newest = turns[-1]["created_at"]
        same = sum(1 for t in turns if t["created_at"] == newest)
        skip = skip + same if newest == since else same
        since = newest


def front_matter(fields: dict[str, Any], body: str) -> str:
    """Markdown with a front matter whose values are JSON (which is YAML too): readable by any YAML reader and
    by ``pps import pps`` without one."""
    lines = ["---"] + [f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in fields.items() if v not in (None, [])]
    return "\n".join(lines) + "\n---\n\n" + body.rstrip("\n") + "\n"


#: What makes the entity itself, carried in the manifest (``settings``) and kept by ``pps import pps``.
SETTINGS = ("timezone", "user_name", "display_name", "identity")


def entity_settings(settings: Any) -> dict[str, str]:
    """The entity's own settings an export carries (:data:`SETTINGS`, those set)."""
    extra = getattr(settings, "model_extra", None) or {}
    values = {"timezone": getattr(settings, "timezone", None), "identity": getattr(settings, "identity", None),
              "user_name": extra.get("user_name"), "display_name": extra.get("display_name")}
    return {k: values[k] for k in SETTINGS if isinstance(values.get(k), str) and values[k]}


def export_entity(client, dest: Path, settings: Any = None) -> dict[str, Any]:
    """Write the export to ``dest`` (new or empty) atomically: built beside it, renamed into place at the end.
    ``settings`` (the entity's): its timezone, names and identity go in the manifest."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ExportRefused(f"{dest}: exists and is not an empty directory (pick a new one)")
    parent = dest.parent if str(dest.parent) else Path(".")
    if not parent.is_dir():
        raise ExportRefused(f"{parent}: no such directory")
    work = parent / f".{dest.name}.partial-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(mode=0o700)
    try:
        manifest = _write(client, work)
        if settings is not None:
            manifest["settings"] = entity_settings(settings)
        _private_file(work / "manifest.json", json.dumps(manifest, ensure_ascii=False, indent=1) + "\n")
        if dest.exists():
            dest.rmdir()
        work.rename(dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return manifest


def _write(client, out: Path) -> dict[str, Any]:
    health = client.call("pps_health", {})
    entity = health.get("entity")
    counts: dict[str, int] = {}
    files: dict[str, str] = {}
    skipped: list[str] = []

    # turns (and which summary covers each), then summaries with the message_ids they cover
    covered: dict[int, list[str]] = {}
    try:
        with open(out / "turns.jsonl", "x", encoding="utf-8") as fh, progress(None, "export turns") as bar:
            os.chmod(out / "turns.jsonl", 0o600)
            n = 0
            for t in iter_turns(client, bar):
                mid = t.get("message_id") or f"pps:{entity}:{t['id']}"
                if t.get("summary_id") is not None:
                    covered.setdefault(t["summary_id"], []).append(mid)
                fh.write(_line({"message_id": mid, "created_at": t["created_at"], "author_name": t["author_name"],
                                "channel": t["channel"], "session_id": t.get("session_id"), "content": t["content"],
                                "metadata": t.get("metadata") or {}, "summary_id": t.get("summary_id")}))
                n += 1
        counts["turns"] = n
        files["turns"] = "turns.jsonl"
    except UnknownOperation:
        (out / "turns.jsonl").unlink(missing_ok=True)
        skipped.append("turns: the entity has no list_turns operation")

    summaries = []
    offset = 0
    while (page := _call(client, "get_recent_summaries", {"limit": 1000, "offset": offset})) is not None:
        summaries += page["summaries"]
        offset += len(page["summaries"])
        if len(page["summaries"]) < 1000:
            break
    if page is None and not summaries:
        skipped.append("summaries: the entity has no get_recent_summaries operation")
    else:
        summaries.sort(key=lambda s: s["id"])
        with open(out / "summaries.jsonl", "x", encoding="utf-8") as fh:
            os.chmod(out / "summaries.jsonl", 0o600)
            for s in summaries:
                fh.write(_line({"id": s["id"], "summary_text": s["summary_text"],
                                "summary_type": s.get("summary_type"), "channels": s.get("channels") or [],
                                "time_span_start": s.get("time_span_start"), "time_span_end": s.get("time_span_end"),
                                "created_at": s.get("created_at"), "message_count": s.get("message_count"),
                                "message_ids": covered.get(s["id"], [])}))
        counts["summaries"] = len(summaries)
        files["summaries"] = "summaries.jsonl"

    # word-photos: one markdown file each, as the entity keeps them
    listing = _call(client, "anchor_list", {"limit": 1000, "offset": 0})
    if listing is None:
        skipped.append("word_photos: the entity has no anchor_list operation")
    else:
        names = [p["filename"] for p in listing["word_photos"]]
        while len(names) < listing["total"]:
            more = client.call("anchor_list", {"limit": 1000, "offset": len(names)})["word_photos"]
            if not more:
                break
            names += [p["filename"] for p in more]
        folder = out / "word_photos"
        folder.mkdir(mode=0o700)
        for name in names:
            photo = client.call("anchor_get", {"filename": name})
            _private_file(folder / _safe_name(name), front_matter(
                {"title": photo.get("title"), "date": photo.get("date"), "tags": photo.get("tags") or [],
                 "location": photo.get("location")}, photo["content"]))
        counts["word_photos"] = len(names)
        files["word_photos"] = "word_photos/"

    # crystals: the window and the archive, oldest first
    crystal_names = _call(client, "crystal_list", {})
    if crystal_names is None:
        skipped.append("crystals: the entity has no crystal_list operation")
    else:
        total = len(crystal_names["current"]) + len(crystal_names["archived"])
        got = client.call("get_crystals", {"count": min(total, 1000)})["crystals"] if total else []
        folder = out / "crystals"
        folder.mkdir(mode=0o700)
        for c in got:
            _private_file(folder / _safe_name(c["name"]), c["content"])  # byte for byte, as the entity keeps it
        counts["crystals"] = len(got)
        files["crystals"] = "crystals/"
        if total > len(got):
            skipped.append(f"crystals: the oldest {total - len(got)} (get_crystals returns at most 1000)")

    # graph facts, as JSON
    facts: list[dict[str, Any]] = []
    offset = 0
    while (page := _call(client, "texture_facts", {"limit": 1000, "offset": offset})) is not None:
        facts += page["facts"]
        offset += page["count"]
        if page.get("next_offset") is None or not page["count"]:
            break
    if page is None and not facts:
        skipped.append("facts: the entity has no texture_facts operation")
    else:
        (out / "graph").mkdir(mode=0o700)
        _private_file(out / "graph" / "facts.json", json.dumps({"facts": facts}, ensure_ascii=False, indent=1) + "\n")
        counts["facts"] = len(facts)
        files["facts"] = "graph/facts.json"

    from pps_core import __version__

    return {"format": FORMAT, "format_version": FORMAT_VERSION, "entity": entity, "exported_at": to_storage(now_utc()),
            "pps_version": __version__, "plugins": health.get("plugins") or [], "counts": counts, "files": files,
            "skipped": skipped}


def _safe_name(name: str) -> str:
    """A file name as the entity reported it, refused if it could leave the folder."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\x00" in name:
        raise ExportRefused(f"refusing the file name {name!r} an operation answered")
    return name
