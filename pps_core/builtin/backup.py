"""``pps backup FILE`` and ``pps restore FILE``: a consistent snapshot of an entity's home, server running or not.

The kernel knows no store by name. A backup is taken by the process that owns the entity: writes through the
catalog pause for the moment of the copy (:meth:`pps_core.Memory.writes_paused`), each layer's
:meth:`~pps_core.layer.Layer.snapshot` copies what cannot be copied as plain files (an embedded graph), any
SQLite database is copied with the online backup API, every other file as it is (every PPS write replaces a
file atomically), and what a layer derives (``Layer.derived_paths``: an index) is skipped. The manifest keeps
each layer's counts, taken while writes are paused (or, for a store a fleet shares, in the same database
snapshot as the rows copied: :meth:`~pps_core.layer.Layer.snapshot_counts`), so ``pps restore`` can check every
layer came back.

A backup stages its copies in folders beside the archive (``.pps-staged-*``, ``.pps-backup-*``: for one a server
writes, in ``<home>/backups``), each locked while in use. A process killed half-way leaves them, holding text a
later forget would not reach: every open of the entity removes those no process holds (:func:`clean_leftovers`).
Ctrl-C of ``pps backup`` while a server writes the archive asks the server to cancel it (``pps_backup`` with
``cancel``), and says what it left.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import logging
import os
import shutil
import sqlite3
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ..auth import CREDENTIALS_DIR
from ..catalog import Operation
from ..errors import Conflict, InvalidParams

if TYPE_CHECKING:  # pragma: no cover
    from ..memory import Memory

SKIP_FILES = {"owner.lock", "token"}
MANIFEST = "pps-backup.json"
FORMAT = 2
#: The folders a backup stages its copies in, beside the archive; each holds :data:`WORK_LOCK` while in use.
WORK_PREFIXES = (".pps-backup-", ".pps-staged-")
WORK_LOCK = ".pps-work.lock"
#: The archive ``pps backup`` has a server write into its backups folder, before moving it where it was asked.
TRANSIT_PREFIX = "pps-cli-"
#: A transit archive older than this was left by a ``pps backup`` that was stopped: removed at the next open.
TRANSIT_MAX_AGE_S = 600.0

log = logging.getLogger("pps.backup")


class Cancelled(Conflict):
    """The backup was cancelled while it was written (``pps_backup`` with ``cancel``): no archive is left."""


@contextlib.contextmanager
def work_dir(prefix: str, parent: Path) -> Iterator[Path]:
    """A fresh folder in ``parent`` for a backup's copies, locked while in use, removed after (whatever happens)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    fd = os.open(tmp / WORK_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        os.close(fd)


def clean_leftovers(folder: Path, now: float | None = None) -> list[str]:
    """Remove from ``folder`` what backups killed half-way left (staging folders no process holds; transit
    archives of a ``pps backup`` stopped before it moved its archive); the names removed."""
    now = time.time() if now is None else now
    removed: list[str] = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    for entry in entries:
        try:
            if entry.is_symlink():
                continue
            if entry.name.startswith(WORK_PREFIXES) and entry.is_dir():
                try:
                    fd = os.open(entry / WORK_LOCK, os.O_RDWR)
                except FileNotFoundError:  # being made this instant, or left by an older PPS
                    if now - entry.stat().st_mtime > 60:
                        shutil.rmtree(entry, ignore_errors=True)
                        removed.append(entry.name)
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a backup in progress
                else:
                    shutil.rmtree(entry, ignore_errors=True)
                    removed.append(entry.name)
                finally:
                    os.close(fd)
            elif (entry.name.startswith(TRANSIT_PREFIX) and entry.name.endswith(".tar.gz") and entry.is_file()
                  and now - entry.stat().st_mtime > TRANSIT_MAX_AGE_S):
                entry.unlink()
                removed.append(entry.name)
        except OSError as exc:
            log.warning("could not remove %s, left by an interrupted backup: %s", entry, exc)
    return removed


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
             counts: dict[str, dict[str, int]] | None = None, entity: str | None = None,
             keep: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Write a .tar.gz snapshot of ``home`` to ``dest`` (atomically, 0600); returns its manifest.

    Home-relative paths in ``claimed`` are taken from ``staged`` (copies made by their layers); paths in
    ``derived`` are left out (rebuilt on restore). ``counts`` (per layer) go in the manifest. ``keep`` is asked
    before the archive is put in place: False (cancelled) raises :class:`Cancelled` and leaves nothing.
    """
    home, dest = Path(home), Path(dest).expanduser().resolve()
    if not (home / "pps.toml").exists():
        raise InvalidParams(f"{home} is not an entity home (no pps.toml)", param="home")
    if dest.exists():
        raise Conflict(f"{dest} exists; choose a new file name", param="file")
    files = 0
    with work_dir(WORK_PREFIXES[0], dest.parent) as tmp:
        part = Path(tmp) / "backup.tar.gz"
        with tarfile.open(part, "w:gz") as tar:
            for root, dirs, names in os.walk(home):
                rel_root = Path(root).relative_to(home)
                dirs[:] = sorted(d for d in dirs if not _under(rel_root / d, set(derived))
                                 and not d.startswith(WORK_PREFIXES)
                                 and not (rel_root == Path(".") and d == CREDENTIALS_DIR))  # live credentials
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
        if keep is not None and not keep():
            raise Cancelled(f"{dest.name}: the backup was cancelled; nothing was written", param="path")
        os.link(part, dest)
    return manifest


def _cancelled(memory: Memory) -> dict[Path, float]:
    found = memory.backups.cancelled
    for path, when in list(found.items()):
        if time.time() - when > 3600:
            del found[path]
    return found


async def snapshot_live(memory: Memory, dest: Path, *, include_token: bool = False) -> dict[str, Any]:
    """A snapshot by the process that owns the stores, with catalog writes paused for the copy."""
    import asyncio

    dest = Path(dest).expanduser().resolve()

    def keep() -> bool:
        return dest not in _cancelled(memory)

    if not keep():
        raise Cancelled(f"{dest.name}: the backup was cancelled; nothing was written", param="path")
    async with memory.writes_paused():
        health = await memory.health(timed=False)  # counts from the stores, however busy the machine
        counts = {name: dict(h.counts) for name, h in health.items() if h.available}
        derived = {p for layer in memory.layers.values() for p in layer.derived_paths} | {memory.settings.backup.dir}
        with work_dir(WORK_PREFIXES[1], dest.parent) as staged:
            claimed: set[str] = set()
            for layer in memory.layers.values():
                claimed.update(await layer.snapshot(staged) or [])
            for name, layer in memory.layers.items():
                copied = await layer.snapshot_counts(staged)  # a shared store: counted with its rows
                if copied is not None:
                    counts[name] = dict(copied)
            return await asyncio.to_thread(snapshot, memory.home, dest, include_token=include_token, staged=staged,
                                           claimed=claimed, derived=derived, counts=counts,
                                           entity=memory.settings.entity, keep=keep)


class BackupParams(BaseModel):
    model_config = {"extra": "forbid"}

    path: str = Field(..., min_length=1, max_length=255,
                      description="archive name (.tar.gz), written to the entity's backups folder "
                                  "([backup] dir, default <home>/backups); or an absolute path inside that folder "
                                  "or a folder [backup] allowed_dirs lists. Must not exist.")
    include_token: bool = Field(False, description="also keep the bearer token in the archive")
    cancel: bool = Field(False, description="cancel the backup asked for with this path: its archive is not "
                                            "written (one this server wrote already is deleted)")


def backup_dir(memory: Memory) -> Path:
    return Path(memory.home) / memory.settings.backup.dir


def destination(memory: Memory, path: str, *, existing: bool = False) -> Path:
    """Where a backup asked for over the wire may go: the backups folder, or an allowed folder. Never the
    live stores, never a dotfile, never a link. ``existing``: the path may exist (a cancel names it)."""
    if "\x00" in path or "\\" in path:
        raise InvalidParams("path: must be a file name or an absolute path", param="path")
    given = Path(path)
    name = given.name
    if not name.endswith((".tar.gz", ".tgz")) or name.startswith(".") or len(name) > 200:
        raise InvalidParams("path: the archive's name must end with .tar.gz or .tgz, not start with '.', and be at "
                            "most 200 characters", param="path")
    folders = [backup_dir(memory)] + [Path(d).expanduser() for d in memory.settings.backup.allowed_dirs]
    if not given.is_absolute():
        if len(given.parts) != 1:
            raise InvalidParams("path: a relative path is a bare file name (written to the backups folder)",
                                param="path")
        folder = folders[0]
        folder.mkdir(mode=0o700, exist_ok=True)
        given = folder / name
    try:
        parent = given.parent.resolve(strict=True)
    except (OSError, RuntimeError):
        raise InvalidParams(f"path: {given.parent} is not a folder this entity may write to", param="path") from None
    allowed = [f.resolve() for f in folders if f.exists()]
    if parent not in allowed:
        shown = ", ".join(str(f) for f in folders)
        raise InvalidParams(f"path: archives go in the backups folder or an allowed folder ({shown})", param="path")
    dest = parent / name
    if os.path.lexists(dest) and not existing:
        raise Conflict(f"path: {dest} exists; choose a new file name", param="path")
    return dest


def _cancel(memory: Memory, dest: Path) -> dict[str, Any]:
    """Cancel the backup to ``dest``: one being written (or about to be) leaves no archive; one this process
    wrote already is deleted. Any other file is left alone."""
    _cancelled(memory)[dest] = time.time()
    written = memory.backups.written
    deleted = False
    if dest in written:
        written.discard(dest)
        with contextlib.suppress(FileNotFoundError):
            dest.unlink()
            deleted = True
    return {"cancelled": True, "file": str(dest), "deleted": deleted}


async def pps_backup(memory: Memory, p: BackupParams) -> dict[str, Any]:
    if p.cancel:
        return _cancel(memory, destination(memory, p.path, existing=True))
    dest = destination(memory, p.path)
    try:
        manifest = await snapshot_live(memory, dest, include_token=p.include_token)
    except PermissionError as exc:
        raise InvalidParams(f"path: cannot write there ({exc.strerror})", param="path") from None
    except OSError as exc:
        if exc.errno in (28, 122):  # ENOSPC, EDQUOT: the storage fault mapping answers 503
            raise
        raise InvalidParams(f"path: cannot write {dest} ({exc.strerror or exc})", param="path") from None
    if dest in _cancelled(memory):  # cancelled as it was put in place
        dest.unlink(missing_ok=True)
        raise Cancelled(f"{dest.name}: the backup was cancelled; nothing was written", param="path")
    memory.backups.written.add(dest)
    return dict(manifest, file=str(dest))


def backup_operation() -> Operation:
    return Operation(
        name="pps_backup", params=BackupParams, handler=pps_backup, group="health", read_only=True,
        description=("Write a consistent snapshot of the entity (every layer, writes paused for the moment of the "
                     "copy) to a new .tar.gz in the entity's backups folder (or an allowed folder). `pps backup` "
                     "calls this when a server owns the entity, then moves the archive where it was asked."))


# -- the command ---------------------------------------------------------------------------------


def add_commands(cli: Any) -> None:
    from .restore import cmd_restore

    p = cli.add("backup", cmd_backup, help="snapshot an entity (every layer) into a .tar.gz, even while it is served")
    p.add_argument("file", help="the archive to write (must not exist)")
    cli.entity_args(p)
    p.add_argument("--include-token", action="store_true", help="also keep the bearer token in the archive")
    p.add_argument("--local", action="store_true", help="copy the files here even if a server runs (not consistent "
                                                        "while it writes; no counts are recorded then)")
    p = cli.add("restore", cmd_restore, help="restore a snapshot into a fresh home and check every layer's counts")
    p.add_argument("file", help="an archive written by `pps backup`")
    cli.entity_args(p)
    p.add_argument("--archive-settings", action="store_true",
                   help="adopt the archive's pps.toml whole, with its settings that reach outside the home ([llm], "
                        "[backup], every plugin's table); by default this machine's settings are kept (a home "
                        "`pps init` made), else only what the entity is (name, plugins, timezone, identity, "
                        "[startup], [recall], ...)")


#: How long Ctrl-C of ``pps backup`` waits for the server to confirm it cancelled the archive.
CANCEL_WAIT_S = 20.0


def _interrupted(settings: Any, name: str) -> int:
    """Ctrl-C while the entity's server writes the archive: ask it to cancel (nothing is written, or what it wrote
    is deleted), and say what is left."""
    from ..forward import try_forward

    folder = Path(settings.home) / settings.backup.dir
    try:
        # bounded: a Ctrl-C is answered in seconds, whatever the server is doing
        answer = try_forward(settings, "pps_backup", {"path": name, "cancel": True}, timeout=CANCEL_WAIT_S)
    except (Exception, KeyboardInterrupt):  # noqa: BLE001 - said below
        answer = None
    if answer is not None and answer.get("cancelled"):
        print(f"pps: backup interrupted: the server cancelled it; no archive is left in {folder}", file=sys.stderr)
    else:
        print(f"pps: backup interrupted: the server may still be writing {folder / name}; delete it when it "
              "appears (the entity's next start removes it after 10 minutes)", file=sys.stderr)
    return 130


def cmd_backup(args: Any) -> int:
    import asyncio
    import secrets
    import shutil

    from ..errors import Unavailable
    from ..forward import try_forward
    from ..memory import Memory
    from ..settings import load_settings

    settings = load_settings(args.entity, args.home, must_exist=True)
    dest = Path(args.file).expanduser().resolve()
    if os.path.lexists(dest):
        raise Conflict(f"{dest} exists; choose a new file name", param="file")
    if not dest.parent.is_dir():
        raise InvalidParams(f"{dest.parent} is not a folder", param="file")
    manifest = None
    if not args.local:
        # Only the owner can pause its own writers: a served entity is backed up by its server, into its
        # backups folder; this process (the user's) then moves the archive where it was asked.
        name = f"{TRANSIT_PREFIX}{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}.tar.gz"
        try:
            manifest = try_forward(settings, "pps_backup", {"path": name, "include_token": args.include_token})
        except KeyboardInterrupt:
            return _interrupted(settings, name)
        if manifest is not None:
            try:
                shutil.move(manifest["file"], dest)
            except KeyboardInterrupt:
                for path in (Path(manifest["file"]), dest):
                    path.unlink(missing_ok=True)
                print(f"pps: backup interrupted while the archive was moved to {dest}: both copies were deleted; "
                      "nothing is left", file=sys.stderr)
                return 130
    if manifest is None:
        async def here() -> dict[str, Any]:
            async with Memory(settings) as memory:
                return await snapshot_live(memory, dest, include_token=args.include_token)

        try:
            manifest = asyncio.run(here())
        except KeyboardInterrupt:
            left = [p.name for p in dest.parent.glob(f"{WORK_PREFIXES[0]}*")] if dest.parent.is_dir() else []
            print(f"pps: backup interrupted: nothing was written to {dest}"
                  + (f" (left in {dest.parent}: {', '.join(left)})" if left else "; its partial copies were deleted"),
                  file=sys.stderr)
            return 130
        except Unavailable:
            if not args.local:
                raise
            manifest = snapshot(Path(settings.home), dest, include_token=args.include_token, entity=settings.entity,
                                derived={settings.backup.dir})
    from ..cli_text import named_counts

    counts = "; ".join(f"{layer}: {named_counts(c)}" for layer, c in manifest["counts"].items() if c)
    print(f"backed up {settings.entity!r} to {args.file}: {manifest['files']} files"
          + (f" ({counts})" if counts else " (no counts: copied from this process while another owns the entity)"))
    return 0
