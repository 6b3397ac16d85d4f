"""``pps anchors sync``: word-photos kept in PostgreSQL as markdown files in a home, edited by hand and sent back.

With ``[chroma] store = "postgres"`` the rows are the word-photos; ``word_photos/*.md`` in the home where the
command runs is an export for reading and editing, kept in step both ways, as ``pps crystals sync`` does:

1. Files first. A file whose name the table does not hold is imported (embedded, name kept): this is how an
   entity moves its word-photo files into PostgreSQL. A file changed since the last sync (its sha-256 differs
   from the one ``word_photos/.sync.json`` recorded) is written to its row if the row is unchanged since that
   sync too, else it is a conflict (the row keeps its text, the file stays as it is). A file whose row was
   deleted since the last sync (by another server) is removed.
2. Then every row is written to ``word_photos/<name>``; ``.sync.json`` records what was written.

Files under ``word_photos/.deleted/`` are left alone (not imported), and so are links and files that are not
UTF-8 (reported as unreadable), as the file store refuses them.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

STATE_FILE = ".sync.json"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sync(layer, folder: Path) -> dict[str, list[str]]:
    """Blocking: the two passes above with an open :class:`~pps_chroma.pgstore.PgAnchorLayer`; a report."""
    from pps_core.atomic import atomic_write

    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    from .files import Unreadable, read_bytes

    report: dict[str, list[str]] = {"imported": [], "updated": [], "conflicts": [], "written": [], "removed": [],
                                    "unreadable": []}
    try:
        state: dict[str, str] = json.loads((folder / STATE_FILE).read_text())
    except (OSError, ValueError):
        state = {}
    rows = dict(layer._run(lambda c: c.execute("SELECT filename, content FROM word_photos").fetchall()))
    for path in sorted(p for p in folder.glob("*.md") if p.is_file()):
        name = path.name
        try:  # never through a link (a link could make this import a file from outside the folder)
            text = read_bytes(path).decode("utf-8").replace("\r\n", "\n")
        except (Unreadable, UnicodeDecodeError) as exc:
            report["unreadable"].append(f"{name}: {exc}")
            continue
        if name not in rows:
            if name in state:  # exported before, deleted since (by any server): the export follows
                path.unlink()
                report["removed"].append(name)
                continue
            vectors = layer._vectors(layer._photo(name, text))
            if layer._run(_insert, layer, name, text, vectors):
                rows[name] = text
                report["imported"].append(name)
            continue
        if _sha(text) == _sha(rows[name]):
            continue
        if state.get(name) == _sha(rows[name]):  # edited here only: the row is as the last sync left it
            vectors = layer._vectors(layer._photo(name, text))
            if layer._run(_update, layer, name, rows[name], text, vectors):
                rows[name] = text
                report["updated"].append(name)
                continue
        if state.get(name) != _sha(text):  # not this home's own old copy of a row changed elsewhere
            report["conflicts"].append(name)
    written: dict[str, str] = {}
    for name, content in sorted(rows.items()):
        if name in report["conflicts"]:
            if name in state:
                written[name] = state[name]
            continue
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8", errors="replace") != content:
            atomic_write(path, content)
            report["written"].append(name)
        written[name] = _sha(content)
    atomic_write(folder / STATE_FILE, json.dumps(written, indent=1))
    return report


def _insert(conn, layer, name: str, text: str, vectors) -> bool:
    if not conn.execute("INSERT INTO word_photos (filename, content) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                        (name, text)).rowcount:
        return False
    layer._put_vectors(conn, name, vectors)
    return True


def _update(conn, layer, name: str, old: str, text: str, vectors) -> bool:
    if not conn.execute("UPDATE word_photos SET content = %s, modified_at = now() WHERE filename = %s AND content = %s",
                        (text, name, old)).rowcount:
        return False
    layer._put_vectors(conn, name, vectors)
    return True


def cmd_anchors_sync(args: argparse.Namespace) -> int:
    from pps_core import Memory
    from pps_core.errors import PPSError
    from pps_core.settings import load_settings

    from .settings import ChromaSettings

    settings = load_settings(args.entity, args.home, must_exist=True)
    cs = settings.plugin_settings(ChromaSettings, "chroma")
    if cs.store != "postgres":
        print('pps anchors sync: [chroma] store is "files" here: the files are the word-photos already (set '
              'store = "postgres" to move them into PostgreSQL with this command)', file=sys.stderr)
        return 2

    async def run() -> dict[str, Any]:
        async with Memory(settings) as memory:
            layer = memory.require_layer("core_anchors")
            return await asyncio.to_thread(sync, layer, Path(settings.home) / cs.directory)

    try:
        report = asyncio.run(run())
    except PPSError as exc:
        print(f"pps anchors sync: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2))
    if report["conflicts"]:
        print("pps anchors sync: edited here and in the database since the last sync (the database's text kept, "
              "the files left as they are): " + ", ".join(report["conflicts"]), file=sys.stderr)
        return 1
    return 0


def register(cli) -> None:
    p = cli.add("anchors", _dispatch, help="word-photos: pps anchors sync (PostgreSQL word-photos <-> markdown files)")
    sub = p.add_subparsers(dest="anchors_command", metavar="SUBCOMMAND", required=True)
    s = sub.add_parser("sync", help="send hand-edited and new word-photo files to PostgreSQL, then write every "
                                    "word-photo out as word_photos/<name>.md")
    cli.entity_args(s)


def _dispatch(args: argparse.Namespace) -> int:
    if args.anchors_command == "sync":
        return cmd_anchors_sync(args)
    return 2
