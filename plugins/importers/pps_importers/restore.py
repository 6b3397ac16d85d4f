"""``pps import pps DIR``: an export written by ``pps export`` into a fresh entity, with every count checked.

Through the entity's operations only: turns by ``store_messages`` (their ``message_id`` kept, so the
``<private>`` filter, idempotence and forgetting apply as on every capture path: a message_id this entity
forgot is not stored again, and the expected count says so), each summary by ``store_summary`` over
exactly the restored turns it covered, word-photos by ``anchor_save`` (with their date), crystals by
``crystallize`` in their order, and the graph's facts that were added directly by ``texture_add_triplet``.
Every other text read from the directory (word-photos, crystals, summaries, facts) passes ``drop_private`` too:
a directory is a channel, and may have been edited. Facts the graph extracted from turns are not restored as
facts: they are derived from the restored turns, and the graph extracts them again when it ingests those
turns (with an ``[llm]``), so forgetting a turn still reaches them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pps_core.errors import UnknownOperation
from pps_core.privacy import drop_private, drop_private_deep
from pps_core.progress import progress

from .export import FORMAT, FORMAT_VERSION
from .send import store_turns


class RestoreError(Exception):
    """The directory cannot be restored here; the message says why (nothing was written unless it says so)."""


def _read_front_matter(text: str) -> tuple[dict[str, Any], str]:
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 4)
    if end < 0:
        return {}, text
    fields: dict[str, Any] = {}
    for line in text[4:end].splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            try:
                fields[key.strip()] = json.loads(value)
            except ValueError:
                fields[key.strip()] = value.strip()
    return fields, text[end + 5:].lstrip("\n")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for n, raw in enumerate(fh, 1):
            if raw.strip():
                try:
                    out.append(json.loads(raw))
                except ValueError as exc:
                    raise RestoreError(f"{path}:{n}: not JSON ({exc})") from None
    return out


def _has(client, name: str, params: dict[str, Any]) -> Any | None:
    try:
        return client.call(name, params)
    except UnknownOperation:
        return None


def _held(client) -> dict[str, int]:
    """What the entity holds now, counted as the export counts."""
    held: dict[str, int] = {}
    page = _has(client, "list_turns", {"limit": 1})
    if page is not None:
        held["turns"] = page["total"]
    stats = _has(client, "summary_stats", {})
    if stats is not None:
        held["summaries"] = int(stats.get("summary_count") or 0)
    photos = _has(client, "anchor_list", {"limit": 1})
    if photos is not None:
        held["word_photos"] = photos["total"]
    crystals = _has(client, "crystal_list", {})
    if crystals is not None:
        held["crystals"] = len(crystals["current"]) + len(crystals["archived"])
    facts = _has(client, "texture_facts", {"limit": 1})
    if facts is not None:
        held["facts"] = facts["total"]
    return held


def adopt_settings(home: Path, src: Path) -> tuple[list[str], list[str]]:
    """Write the export's own settings (its manifest's ``settings``: timezone, names, identity) into the entity's
    pps.toml, each one the pps.toml does not set itself; returns (adopted, kept as they were). Before the entity
    is opened, so what is imported is read in its zone."""
    import tomllib

    from pps_core.atomic import atomic_write
    from pps_core.settings import validate_values

    from .export import SETTINGS

    manifest = _manifest(src)
    given = manifest.get("settings") if isinstance(manifest.get("settings"), dict) else {}
    toml = home / "pps.toml"
    text = toml.read_text(encoding="utf-8")
    own = tomllib.loads(text)
    wanted = {k: given[k] for k in SETTINGS if isinstance(given.get(k), str) and given[k]}
    adopted = {k: v for k, v in wanted.items() if k not in own}
    if adopted:
        try:
            validate_values({**own, **adopted}, home)
        except Exception as exc:  # noqa: BLE001 - a bad value in the export: said, nothing written
            raise RestoreError(f"the export's settings cannot be used: {getattr(exc, 'message', exc)}") from None
        # top-level keys go before the first table of the file: first lines
        lines = [f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in adopted.items()]
        atomic_write(toml, "\n".join(lines) + "\n" + text)
    return list(adopted), [k for k in wanted if k in own]


def _manifest(src: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((src / "manifest.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RestoreError(f"{src}: no manifest.json (is it a directory written by `pps export`?)") from None
    except ValueError as exc:
        raise RestoreError(f"{src / 'manifest.json'}: not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise RestoreError(f"{src / 'manifest.json'}: not a PPS export (format is not {FORMAT!r})")
    return manifest


def restore_entity(client, src: Path) -> dict[str, Any]:
    src = Path(src)
    manifest = _manifest(src)
    if manifest.get("format_version") != FORMAT_VERSION:
        raise RestoreError(f"{src}: export format version {manifest.get('format_version')!r}; this PPS reads "
                           f"version {FORMAT_VERSION}")
    exported: dict[str, int] = manifest.get("counts") or {}
    before = _held(client)
    busy = {k: v for k, v in before.items() if v and k in exported}
    if busy:
        held = ", ".join(f"{v} {k}" for k, v in busy.items())
        raise RestoreError(f"`pps import pps` restores into a fresh entity; this one already holds {held} "
                           "(create a new one with `pps init`)")
    missing = [k for k, v in exported.items() if v and k not in before]
    if missing:
        raise RestoreError(f"the export holds {', '.join(missing)} but this entity loads no plugin that keeps "
                           "them (add the plugins to its pps.toml)")

    report: dict[str, dict[str, Any]] = {}
    ids: dict[str, int] = {}
    if "turns" in exported:
        turns = _jsonl(src / "turns.jsonl")
        entries = [{k: t[k] for k in ("content", "author_name", "channel", "session_id", "created_at", "metadata",
                                      "message_id") if t.get(k) is not None} for t in turns]
        result = store_turns(client, entries, "restore turns")
        ids = {t["message_id"]: i for t, i in zip(entries, result["ids"], strict=False) if i is not None}
        report["turns"] = {"exported": exported["turns"], "expected": len(turns) - result["forgotten"]}
        if result["forgotten"]:  # the entity forgot these message_ids once: a forgotten turn never comes back
            report["turns"]["note"] = f"{result['forgotten']} forgotten in this entity earlier, not stored again"
    if "summaries" in exported:
        summaries = _jsonl(src / "summaries.jsonl")
        lost = 0
        with progress(len(summaries), "restore summaries", unit="summary") as bar:
            for s in summaries:
                covered = [ids[m] for m in s.get("message_ids") or [] if m in ids]
                if not covered:
                    lost += 1  # its turns were forgotten (before the export, or by this entity): nothing to cover
                else:
                    params = {"summary_text": drop_private(s["summary_text"]), "message_ids": covered}
                    if s.get("channels"):
                        params["channels"] = s["channels"]
                    for key in ("summary_type", "created_at"):  # written then, not now
                        if s.get(key):
                            params[key] = s[key]
                    client.call("store_summary", params)
                bar.update(1)
        report["summaries"] = {"exported": exported["summaries"], "expected": len(summaries) - lost}
        if lost:
            report["summaries"]["note"] = f"{lost} covered no restored turn"
    if "word_photos" in exported:
        files = sorted((src / "word_photos").glob("*.md"))
        dated = []
        for path in files:
            fields, body = _read_front_matter(path.read_text(encoding="utf-8"))
            fields, body = drop_private_deep(fields, strict=False), drop_private(body)
            dated.append((str(fields.get("date") or ""), path.name, fields, body))
        for _date, name, fields, body in sorted(dated):  # oldest first, so the newest stays newest
            params = {"content": body, "title": fields.get("title") or Path(name).stem}
            for key in ("location", "tags", "date"):
                if fields.get(key):
                    params[key] = fields[key]
            client.call("anchor_save", params)
        report["word_photos"] = {"exported": exported["word_photos"], "expected": len(files)}
    if "crystals" in exported:
        files = sorted((src / "crystals").glob("crystal_*.md"), key=lambda p: (len(p.stem), p.stem))
        for path in files:
            client.call("crystallize", {"content": drop_private(path.read_text(encoding="utf-8"))})
        report["crystals"] = {"exported": exported["crystals"], "expected": len(files)}
    if "facts" in exported:
        facts = drop_private_deep(json.loads((src / "graph" / "facts.json").read_text(encoding="utf-8"))["facts"],
                                  strict=False)
        direct = [f for f in facts if not f.get("episodes")]
        for f in direct:
            params = {"source": f["subject"], "relationship": f["predicate"], "target": f["object"],
                      "fact": f["fact"]}
            if f.get("valid_at"):
                params["valid_at"] = f["valid_at"]
            client.call("texture_add_triplet", params)
        report["facts"] = {"exported": exported["facts"], "expected": len(direct)}
        if len(direct) < len(facts):
            report["facts"]["note"] = (f"{len(facts) - len(direct)} extracted from turns come back when the graph "
                                       "ingests the restored turns")
    after = _held(client)
    problems = []
    for kind, got in report.items():
        got["restored"] = after.get(kind, 0)
        if got["restored"] != got["expected"]:
            problems.append(f"{kind}: {got['restored']} restored, {got['expected']} expected")
    return {"ok": not problems, "problems": problems, "counts": report}


