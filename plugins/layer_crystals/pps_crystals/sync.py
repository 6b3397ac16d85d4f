"""``pps crystals sync``: the PostgreSQL crystals as markdown files in a home, edited by hand and sent back.

With ``[crystals] store = "postgres"`` the table is the crystals; the files are an export for reading and editing
with any editor, kept in step both ways by running ``pps crystals sync`` (on any server's home, any time):

1. Files first. A ``crystal_NNN.md`` (in ``crystals/`` or ``crystals/archive/``) whose number the table has never
   held is imported with that number: this is how an entity moves from files to PostgreSQL (the numbers of
   ``crystals/deleted/`` come along as deleted or forgotten). A file changed since the last sync (its sha-256
   differs from the one recorded in ``crystals/.sync.json``) is written to its row if the row is unchanged since
   that sync too (its version); if both changed, the file is left as it is and reported as a conflict (the
   table keeps its text; edit the file again after the next sync).
2. Then the table: every live crystal is written to ``crystals/`` (the window) or ``crystals/archive/``, a deleted
   one to ``crystals/deleted/``; the file of a forgotten crystal is removed wherever it is. ``.sync.json`` records
   what was written.

A sync holds ``crystals/.lock`` (the file store's lock), so two syncs of one home take turns.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pps_core.atomic import plain_problem, read_plain

from .layer import LOCK_NAME, CrystalSettings, crystal_name, numbered, readable

STATE_FILE = ".sync.json"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


async def _rows(conn) -> dict[int, tuple[str, str, int]]:
    cur = await conn.execute("SELECT number, content, state, version FROM crystals")
    return {int(n): (c, s, int(v)) for n, c, s, v in await cur.fetchall()}


async def _import(conn, number: int, content: str, state: str) -> bool:
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext('pps-crystals-number'))")
    cur = await conn.execute("INSERT INTO crystals (number, content, state) VALUES (%s, %s, %s) "
                             "ON CONFLICT (number) DO NOTHING", (number, content, state))
    return bool(cur.rowcount)


async def _update(conn, number: int, content: str, version: int) -> bool:
    cur = await conn.execute("UPDATE crystals SET content = %s, version = version + 1, modified_at = now() "
                             "WHERE number = %s AND version = %s AND state = 'live'", (content, number, version))
    return bool(cur.rowcount)


def _files(folder: Path) -> dict[int, Path]:
    """The plain crystal files of ``folder``: a link is never read (nor sent to the table)."""
    return dict(readable(numbered(folder))) if folder.is_dir() else {}


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """The file store's lock (``crystals/.lock``, :meth:`CrystalLayer.locked`): one sync of a home at a time."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read(path: Path) -> str:
    return read_plain(path).decode("utf-8", errors="replace")


async def sync(settings, entity_settings) -> dict[str, Any]:
    """Send the home's edited and unknown crystal files to the table, then write the table out; a report."""
    from pps_core.atomic import atomic_write

    from .pgstore import open_store

    cs: CrystalSettings = settings
    home = Path(entity_settings.home)
    folder = Path(home) / cs.directory
    archive, trash = folder / "archive", folder / "deleted"
    store = open_store(cs, entity_settings)
    report: dict[str, list[str]] = {"imported": [], "updated": [], "conflicts": [], "written": [], "removed": []}
    try:
        with _locked(folder):
            try:
                state = {int(k): v for k, v in json.loads((folder / STATE_FILE).read_text()).items()}
            except (OSError, ValueError):
                state = {}
            rows = await store.run(_rows)
            live_files = {**_files(archive), **_files(folder)}
            for number, path in sorted(live_files.items()):
                text = _read(path)
                if number not in rows:
                    if await store.run(_import, number, text, "live"):
                        report["imported"].append(crystal_name(number))
                    continue
                seen = state.get(number)
                if seen is None or _sha(text) == seen[1]:
                    continue  # not edited here since the last sync (or never synced: the table wins)
                if await store.run(_update, number, text, int(seen[0])):
                    report["updated"].append(crystal_name(number))
                else:
                    report["conflicts"].append(crystal_name(number))
            for number, path in sorted(_files(trash).items()):
                if number not in rows and number not in live_files:
                    text = _read(path)
                    if await store.run(_import, number, text, "deleted" if text else "forgotten"):
                        report["imported"].append(crystal_name(number))
            rows = await store.run(_rows)
            live = sorted(n for n, r in rows.items() if r[1] == "live")
            window = set(live[-cs.window:])
            new_state: dict[str, list] = {}
            for number, (content, st, version) in sorted(rows.items()):
                name = crystal_name(number)
                places = [folder / name, archive / name, trash / name]
                if name in report["conflicts"]:
                    new_state[str(number)] = state[number]
                    continue
                target = (places[0] if number in window else places[1]) if st == "live" else (
                    places[2] if st == "deleted" else None)
                for p in places:
                    if p != target and p.is_file():
                        p.unlink()
                        report["removed"].append(str(p.relative_to(home)))
                if target is None:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                if plain_problem(target) or not target.is_file() or _read(target) != content:  # a link: replaced
                    atomic_write(target, content)
                    report["written"].append(str(target.relative_to(home)))
                new_state[str(number)] = [version, _sha(content)]
            atomic_write(folder / STATE_FILE, json.dumps(new_state, indent=1))
    finally:
        await store.close()
    return report


def cmd_crystals_sync(args: argparse.Namespace) -> int:
    from pps_core.errors import PPSError
    from pps_core.settings import load_settings

    settings = load_settings(args.entity, args.home, must_exist=True)
    cs = settings.plugin_settings(CrystalSettings, "crystals")
    if cs.store != "postgres":
        print('pps crystals sync: [crystals] store is "files" here: the files are the crystals already '
              '(set store = "postgres" and dsn to move them into PostgreSQL with this command)', file=sys.stderr)
        return 2
    try:
        report = asyncio.run(sync(cs, settings))
    except PPSError as exc:
        print(f"pps crystals sync: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2))
    if report["conflicts"]:
        print("pps crystals sync: edited here and in the table since the last sync (the table's text kept, the "
              "files left as they are): " + ", ".join(report["conflicts"]), file=sys.stderr)
        return 1
    return 0


def register(cli) -> None:
    p = cli.add("crystals", _dispatch, help="crystals: pps crystals sync (PostgreSQL crystals <-> markdown files)")
    sub = p.add_subparsers(dest="crystals_command", metavar="SUBCOMMAND", required=True)
    s = sub.add_parser("sync", help="send hand-edited and new crystal files to PostgreSQL, then write every "
                                    "crystal out as crystals/crystal_NNN.md")
    cli.entity_args(s)


def _dispatch(args: argparse.Namespace) -> int:
    if args.crystals_command == "sync":
        return cmd_crystals_sync(args)
    return 2


