"""``pps backup FILE`` and ``pps restore FILE``: a consistent snapshot of an entity's home, server running or not.

The kernel knows no store by name. A backup is taken by the process that owns the entity: writes through the
catalog pause for the moment of the copy (:meth:`pps_core.Memory.writes_paused`), each layer's
:meth:`~pps_core.layer.Layer.snapshot` copies what cannot be copied as plain files (an embedded graph), any
SQLite database is copied with the online backup API, every other file as it is (every PPS write replaces a
file atomically), and what a layer derives (``Layer.derived_paths``: an index) is skipped. The manifest keeps
each layer's counts, taken while writes are paused, so ``pps restore`` can check every layer came back.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import tarfile
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ..catalog import Operation
from ..errors import Conflict, InvalidParams

if TYPE_CHECKING:  # pragma: no cover
    from ..memory import Memory

SKIP_FILES = {"owner.lock", "token"}
MANIFEST = "pps-backup.json"
FORMAT = 2


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _copy_sqlite(src: Path, dest: Path) -> None:
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True, timeout=30)
    target = sqlite3.connect(dest)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def _under(rel: Path, paths: set[str]) -> bool:
    return any(rel == Path(c) or Path(c) in rel.parents for c in paths)


def snapshot(home: Path, dest: Path, *, include_token: bool = False, staged: Path | None = None,
             claimed: set[str] | frozenset[str] = frozenset(), derived: set[str] | frozenset[str] = frozenset(),
             counts: dict[str, dict[str, int]] | None = None, entity: str | None = None) -> dict[str, Any]:
    """Write a .tar.gz snapshot of ``home`` to ``dest`` (atomically, 0600); returns its manifest.

    Home-relative paths in ``claimed`` are taken from ``staged`` (copies made by their layers); paths in
    ``derived`` are left out (rebuilt on restore). ``counts`` (per layer) go in the manifest.
    """
    home, dest = Path(home), Path(dest).expanduser().resolve()
    if not (home / "pps.toml").exists():
        raise InvalidParams(f"{home} is not an entity home (no pps.toml)", param="home")
    if dest.exists():
        raise Conflict(f"{dest} exists; choose a new file name", param="file")
    files = 0
    with tempfile.TemporaryDirectory(prefix=".pps-backup-", dir=dest.parent) as tmp:
        part = Path(tmp) / "backup.tar.gz"
        with tarfile.open(part, "w:gz") as tar:
            for root, dirs, names in os.walk(home):
                rel_root = Path(root).relative_to(home)
                dirs[:] = sorted(d for d in dirs if not _under(rel_root / d, set(derived))
                                 and not d.startswith((".pps-backup-", ".pps-staged-")))
                for name in sorted(names):
                    src = Path(root) / name
                    rel = rel_root / name
                    if name.endswith((".tmp", "-wal", "-shm", "-journal")) or _under(rel, set(claimed) | set(derived)) \
                            or (rel_root == Path(".") and name in SKIP_FILES and not (name == "token" and include_token)) \
                            or src.is_symlink():
                        continue
                    if _is_sqlite(src):
                        copy = Path(tmp) / f"db{files}"
                        _copy_sqlite(src, copy)
                        tar.add(copy, arcname=str(rel))
                    else:
                        try:
                            tar.add(src, arcname=str(rel))
                        except FileNotFoundError:  # moved meanwhile (a document rolled to an archive)
                            continue
                    files += 1
            for rel_path in sorted(claimed):
                if staged is not None and (staged / rel_path).exists():
                    tar.add(staged / rel_path, arcname=rel_path)
                    files += 1 if (staged / rel_path).is_file() else sum(len(f) for _r, _d, f in os.walk(staged / rel_path))
            manifest = {"format": FORMAT, "entity": entity, "home": str(home),
                        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "files": files,
                        "counts": counts or {}, "token_included": include_token,
                        "layers_copied_live": sorted(claimed), "derived_skipped": sorted(derived)}
            data = json.dumps(manifest, indent=2).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
            tar.addfile(info, io.BytesIO(data))
        os.chmod(part, 0o600)
        os.link(part, dest)
    return manifest


async def snapshot_live(memory: Memory, dest: Path, *, include_token: bool = False) -> dict[str, Any]:
    """A snapshot by the process that owns the stores, with catalog writes paused for the copy."""
    import asyncio

    dest = Path(dest).expanduser().resolve()
    async with memory.writes_paused():
        health = await memory.health()
        counts = {name: dict(h.counts) for name, h in health.items() if h.available}
        derived = {p for layer in memory.layers.values() for p in layer.derived_paths}
        with tempfile.TemporaryDirectory(prefix=".pps-staged-", dir=dest.parent) as tmp:
            staged, claimed = Path(tmp), set()
            for layer in memory.layers.values():
                claimed.update(await layer.snapshot(staged) or [])
            return await asyncio.to_thread(snapshot, memory.home, dest, include_token=include_token, staged=staged,
                                           claimed=claimed, derived=derived, counts=counts,
                                           entity=memory.settings.entity)


class BackupParams(BaseModel):
    model_config = {"extra": "forbid"}

    path: str = Field(..., min_length=1, max_length=4096,
                      description="absolute path of the .tar.gz to write, on the server's machine (must not exist)")
    include_token: bool = Field(False, description="also keep the bearer token in the archive")


async def pps_backup(memory: Memory, p: BackupParams) -> dict[str, Any]:
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


def backup_operation() -> Operation:
    return Operation(
        name="pps_backup", params=BackupParams, handler=pps_backup, group="health", read_only=True,
        description=("Write a consistent snapshot of the entity (every layer, writes paused for the moment of the "
                     "copy) to a new .tar.gz at an absolute path on the server's machine. `pps backup` calls this "
                     "when a server owns the entity."))


# -- restore -------------------------------------------------------------------------------------


def restore(archive: Path, home: Path, entity: str | None = None) -> dict[str, Any]:
    """Unpack a snapshot into a fresh (absent or empty) home; returns the manifest."""
    import re

    from ..auth import ensure_token

    archive, home = Path(archive).expanduser(), Path(home)
    if home.exists() and any(home.iterdir()):
        raise Conflict(f"{home} is not empty; restore into a fresh home (--home DIR or a new --entity)",
                       param="home")
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(home, 0o700)
    with tarfile.open(archive, "r:gz") as tar:
        member = tar.extractfile(MANIFEST)
        if member is None:
            raise InvalidParams(f"{archive} is not a PPS backup (no {MANIFEST})", param="file")
        manifest: dict[str, Any] = json.load(member)
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
    ensure_token(home)
    return manifest


async def verify(home: Path, entity: str | None, manifest: dict[str, Any]) -> dict[str, Any]:
    """Open the restored entity, let each layer adopt its files (``after_restore``), count what it holds."""
    from ..memory import Memory

    async with Memory.for_entity(entity, home) as memory:
        for layer in memory.layers.values():
            await layer.after_restore(manifest)
        health = await memory.health()
    return {"ok": all(h.available for h in health.values()),
            "counts": {name: dict(h.counts) for name, h in health.items()}}


def compare(want: dict[str, dict[str, int]], have: dict[str, dict[str, int]]) -> dict[str, tuple[Any, Any]]:
    """Per-layer counts that differ between the archive's manifest and the restored entity."""
    differ: dict[str, tuple[Any, Any]] = {}
    for layer, counts in want.items():
        for key, n in counts.items():
            got = have.get(layer, {}).get(key)
            if got != n:
                differ[f"{layer}.{key}"] = (n, got)
    return differ


# -- the commands ----------------------------------------------------------------------------------


def add_commands(cli: Any) -> None:
    p = cli.add("backup", cmd_backup, help="snapshot an entity (every layer) into a .tar.gz, even while it is served")
    p.add_argument("file", help="the archive to write (must not exist)")
    cli.entity_args(p)
    p.add_argument("--include-token", action="store_true", help="also keep the bearer token in the archive")
    p.add_argument("--local", action="store_true", help="copy the files here even if a server runs (not consistent "
                                                        "while it writes; no counts are recorded then)")
    p = cli.add("restore", cmd_restore, help="restore a snapshot into a fresh home and check every layer's counts")
    p.add_argument("file", help="an archive written by `pps backup`")
    cli.entity_args(p)


def cmd_backup(args: Any) -> int:
    import asyncio

    from ..errors import Unavailable
    from ..forward import try_forward
    from ..memory import Memory
    from ..settings import load_settings

    settings = load_settings(args.entity, args.home, must_exist=True)
    dest = Path(args.file).expanduser().resolve()
    manifest = None
    if not args.local:
        # Only the owner can pause its own writers: a served entity is backed up by its server.
        manifest = try_forward(settings, "pps_backup", {"path": str(dest), "include_token": args.include_token})
    if manifest is None:
        async def here() -> dict[str, Any]:
            async with Memory(settings) as memory:
                return await snapshot_live(memory, dest, include_token=args.include_token)

        try:
            manifest = asyncio.run(here())
        except Unavailable:
            if not args.local:
                raise
            manifest = snapshot(Path(settings.home), dest, include_token=args.include_token, entity=settings.entity)
    counts = ", ".join(f"{layer} {n}" for layer, c in manifest["counts"].items() for n in [sum(c.values())] if c)
    print(f"backed up {settings.entity!r} to {args.file}: {manifest['files']} files"
          + (f" ({counts})" if counts else " (no counts: copied from this process while another owns the entity)"))
    return 0


def cmd_restore(args: Any) -> int:
    import asyncio
    import sys

    from ..settings import entity_home

    home = entity_home(args.entity, args.home)
    manifest = restore(Path(args.file), home, args.entity)
    found = asyncio.run(verify(home, args.entity, manifest))
    want = manifest["counts"] if manifest.get("format", 1) >= 2 else {}
    differ = compare(want, found["counts"])
    shown = "; ".join(f"{layer}: " + ", ".join(f"{k} {v}" for k, v in c.items()) for layer, c in want.items() if c)
    print(f"restored {args.file} into {home}" + (f": {shown}" if shown else ""))
    if differ:
        print("pps: error: restored counts differ from the backup's: "
              + ", ".join(f"{k} {a} in the archive, {b} restored" for k, (a, b) in differ.items()), file=sys.stderr)
        return 1
    if not manifest.get("token_included"):
        print("a new token was written (`pps token`); the backup did not include one")
    return 0
