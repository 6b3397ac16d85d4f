"""``pps backup FILE`` and ``pps restore FILE``: a consistent snapshot of an entity's home, server running or not.

SQLite databases are copied with the online backup API (a consistent snapshot while a server writes);
files (crystals, word-photos, ``_recap.md``, ``pps.toml``) are copied as they are: every PPS write replaces
a file atomically, so each copy is a whole old or whole new file. A store that cannot be copied like that
while it is written (the embedded graph) is copied by its layer (:meth:`pps_core.layer.Layer.snapshot`:
writes paused, flushed, copied), so while a server owns the entity the backup runs inside it (the
``pps_backup`` operation, which ``pps backup`` forwards to). The Chroma index is not copied: restore
rebuilds it from the word-photo files. The token stays behind unless asked for.
"""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, Field

from .errors import Conflict, InvalidParams

SKIP_DIRS = {"chroma"}
SKIP_FILES = {"owner.lock", "token"}
MANIFEST = "pps-backup.json"


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _copy_sqlite(src: Path, dest: Path) -> dict[str, int]:
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True, timeout=30)
    target = sqlite3.connect(dest)
    try:
        source.backup(target)
        tables = [r[0] for r in target.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                               "name IN ('messages', 'message_summaries')")]
        return {t: target.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}
    finally:
        target.close()
        source.close()


def _claimed(rel: Path, claimed: set[str]) -> bool:
    return any(rel == Path(c) or Path(c) in rel.parents for c in claimed)


def snapshot(home: Path, dest: Path, *, include_token: bool = False, staged: Path | None = None,
             claimed: set[str] = frozenset()) -> dict:
    """Write a .tar.gz snapshot of ``home`` to ``dest`` (atomically, 0600); returns its manifest.

    Home-relative paths in ``claimed`` are taken from ``staged`` (copies made by their layers) instead.
    """
    home, dest = Path(home), Path(dest).expanduser().resolve()
    if not (home / "pps.toml").exists():
        raise InvalidParams(f"{home} is not an entity home (no pps.toml)", param="home")
    if dest.exists():
        raise Conflict(f"{dest} exists; choose a new file name", param="file")
    counts: dict[str, int] = {}
    files = 0
    with tempfile.TemporaryDirectory(prefix=".pps-backup-", dir=dest.parent) as tmp:
        part = Path(tmp) / "backup.tar.gz"
        with tarfile.open(part, "w:gz") as tar:
            for root, dirs, names in os.walk(home):
                rel_root = Path(root).relative_to(home)
                dirs[:] = [d for d in dirs if not (rel_root == Path(".") and d in SKIP_DIRS)]
                for name in sorted(names):
                    src = Path(root) / name
                    rel = rel_root / name
                    if name.endswith((".tmp", "-wal", "-shm", "-journal")) or _claimed(rel, claimed) or (
                            rel_root == Path(".") and name in SKIP_FILES and not (name == "token" and include_token)):
                        continue
                    if _is_sqlite(src):
                        copy = Path(tmp) / f"db{files}"
                        for table, n in _copy_sqlite(src, copy).items():
                            counts[table] = counts.get(table, 0) + n
                        tar.add(copy, arcname=str(rel))
                    else:
                        try:
                            tar.add(src, arcname=str(rel))
                        except FileNotFoundError:  # moved meanwhile (a crystal rolled to the archive)
                            continue
                    files += 1
            for rel in sorted(claimed):
                if staged is not None and (staged / rel).exists():
                    tar.add(staged / rel, arcname=rel)
                    files += 1 if (staged / rel).is_file() else sum(len(f) for _r, _d, f in os.walk(staged / rel))
            counts["crystals"] = len([1 for m in tar.getnames() if re.search(r"crystals/(archive/)?crystal_\d+\.md$", m)])
            counts["word_photos"] = len([1 for m in tar.getnames() if re.match(r"word_photos/[^/.][^/]*\.md$", m)])
            manifest = {"format": 1, "home": str(home), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "files": files, "counts": counts, "token_included": include_token,
                        "layers_copied_live": sorted(claimed)}
            data = json.dumps(manifest, indent=2).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
            tar.addfile(info, io.BytesIO(data))
        os.chmod(part, 0o600)
        os.link(part, dest)
    return manifest


async def snapshot_live(memory, dest: Path, *, include_token: bool = False) -> dict:
    """A snapshot by the process that owns the stores: layers with a ``snapshot`` copy their own files first."""
    import asyncio

    dest = Path(dest).expanduser().resolve()
    with tempfile.TemporaryDirectory(prefix=".pps-staged-", dir=dest.parent) as tmp:
        staged, claimed = Path(tmp), set()
        for layer in memory.layers.values():
            method = getattr(layer, "snapshot", None)
            paths = await method(staged) if method is not None else None
            claimed.update(paths or [])
        manifest = await asyncio.to_thread(snapshot, memory.home, dest, include_token=include_token,
                                           staged=staged, claimed=claimed)
    return manifest


class BackupParams(BaseModel):
    model_config = {"extra": "forbid"}

    path: str = Field(..., min_length=1, max_length=4096,
                      description="absolute path of the .tar.gz to write, on the server's machine (must not exist)")
    include_token: bool = Field(False, description="also keep the bearer token in the archive")


async def pps_backup(memory, p: BackupParams) -> dict:
    dest = Path(p.path)
    if "\x00" in p.path or not dest.is_absolute():
        raise InvalidParams("path: must be an absolute file path", param="path")
    if not dest.name.endswith((".tar.gz", ".tgz")) or dest.name.startswith("."):
        # whoever holds the token chooses where the server writes: only ever an archive, never a dotfile
        raise InvalidParams("path: the archive's name must end with .tar.gz or .tgz (and not start with '.')",
                            param="path")
    if not dest.parent.is_dir():
        raise InvalidParams(f"path: {dest.parent} is not a directory", param="path")
    if dest.exists():
        raise Conflict(f"path: {dest} exists; choose a new file name", param="path")
    try:
        manifest = await snapshot_live(memory, dest, include_token=p.include_token)
    except PermissionError as exc:
        raise InvalidParams(f"path: cannot write there ({exc.strerror})", param="path") from None
    return dict(manifest, file=str(dest))


def backup_operation():
    from .catalog import Operation

    return Operation(
        name="pps_backup", params=BackupParams, handler=pps_backup, group="health",
        description=("Write a consistent snapshot of the entity (every layer: databases by the online backup API, "
                     "the graph with its writes paused and flushed, files) to a new .tar.gz at an absolute path "
                     "on the server's machine. `pps backup` calls this when a server owns the entity."))


def restore(archive: Path, home: Path, entity: str | None = None) -> dict:
    """Unpack a snapshot into a fresh (absent or empty) home; returns the manifest."""
    archive, home = Path(archive).expanduser(), Path(home)
    if home.exists() and any(home.iterdir()):
        raise Conflict(f"{home} is not empty; restore into a fresh home (--home DIR or a new --entity)",
                       param="home")
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(home, 0o700)
    with tarfile.open(archive, "r:gz") as tar:
        manifest = json.load(tar.extractfile(MANIFEST))
        members = [m for m in tar.getmembers() if m.name != MANIFEST]
        tar.extractall(home, members=members, filter="data")  # no absolute paths, no '..', no devices
    for root, dirs, files in os.walk(home):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o700)
        for f in files:
            os.chmod(os.path.join(root, f), 0o600)
    if entity:
        toml = home / "pps.toml"
        toml.write_text(re.sub(r'(?m)^entity\s*=\s*".*"$', f'entity = "{entity}"', toml.read_text()))
    from .auth import ensure_token

    ensure_token(home)
    return manifest


async def verify(home: Path, entity: str | None) -> dict:
    """Open the restored entity (rebuilding the word-photo index) and count what it holds."""
    from .memory import Memory

    async with Memory.for_entity(entity, home) as memory:
        health = await memory.call("pps_health", {})
    counts: dict[str, int] = {}
    for layer in health["layers"].values():
        counts.update(layer.get("counts") or {})
    return {"ok": health["ok"], "counts": counts}


def add_parsers(sub, entity_args) -> None:
    p = sub.add_parser("backup", help="snapshot an entity (every layer) into a .tar.gz, even while it is served")
    p.add_argument("file", help="the archive to write (must not exist)")
    entity_args(p)
    p.add_argument("--include-token", action="store_true", help="also keep the bearer token in the archive")
    p.add_argument("--local", action="store_true", help="copy the files here even if a server runs (not consistent "
                                                        "for the graph while it is written)")
    p = sub.add_parser("restore", help="restore a snapshot into a fresh home and check it")
    p.add_argument("file", help="an archive written by `pps backup`")
    entity_args(p)


def cmd_backup(args) -> int:
    from .settings import load_settings

    settings = load_settings(args.entity, args.home, must_exist=True)
    dest = Path(args.file).expanduser().resolve()
    manifest = None
    if not args.local:
        from .forward import try_forward

        # Only the owner can pause its own writers (the graph): a served entity is backed up by its server.
        manifest = try_forward(settings, "pps_backup", {"path": str(dest), "include_token": args.include_token})
    if manifest is None:
        manifest = snapshot(Path(settings.home), dest, include_token=args.include_token)
    print(f"backed up {settings.entity!r} to {args.file}: {manifest['files']} files, "
          + ", ".join(f"{k} {v}" for k, v in manifest["counts"].items()))
    return 0


def cmd_restore(args) -> int:
    import asyncio

    from .settings import entity_home

    home = entity_home(args.entity, args.home)
    manifest = restore(Path(args.file), home, args.entity)
    found = asyncio.run(verify(home, args.entity))
    want = manifest["counts"]
    have = dict(found["counts"], message_summaries=found["counts"].get("summaries"))
    if "crystals" in have:
        have["crystals"] += have.get("archived", 0)
    differ = {k: (v, have[k]) for k, v in want.items() if have.get(k) is not None and have[k] != v}
    print(f"restored {args.file} into {home}: " + ", ".join(f"{k} {v}" for k, v in want.items()))
    if differ:
        print(f"pps: error: restored counts differ from the backup's: {differ}", file=sys.stderr)
        return 1
    if not manifest.get("token_included"):
        print("a new token was written (`pps token`); the backup did not include one")
    return 0


COMMANDS = {"backup": cmd_backup, "restore": cmd_restore}
