"""``pps restore FILE``: an archive is hostile input until every member checked out.

Members are checked by this module, not by the interpreter's tarfile filter (which had bypasses): only
regular files and folders, relative names without ``..``, no duplicates. They are written into a fresh staging
folder beside the target (files created exclusively, without following links), then the staging folder is moved
into place in one rename. On any failure nothing is left behind and the error is one line. The restored entity
is then opened: a ``pps.toml`` that points a store outside the home is refused (``pps_core.StorePath``) and the
restored home removed; each layer adopts its files (``after_restore``) and its counts, read from the stores (no
timed health call), are compared with the archive's manifest.

The archive's ``pps.toml`` is hostile too (issue 35): this machine's settings are kept (a home ``pps init`` made),
else only what the entity is (:data:`KEPT_TABLES`); tables that reach outside the home (``[llm] base_url``,
``[backup] allowed_dirs``, each plugin's) are adopted only with ``--archive-settings``. The command says which.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from ..auth import CREDENTIALS_DIR
from ..errors import Conflict, InvalidParams, PPSError

MANIFEST = "pps-backup.json"
CHUNK = 1 << 20


def _refuse(archive: Path, why: str) -> InvalidParams:
    return InvalidParams(f"{archive}: {why}; nothing was restored", param="file")


def _checked_members(archive: Path, tar: tarfile.TarFile) -> tuple[dict[str, Any], list[tarfile.TarInfo]]:
    manifest: dict[str, Any] | None = None
    members: list[tarfile.TarInfo] = []
    seen: set[str] = set()
    for m in tar.getmembers():
        name = m.name
        path = PurePosixPath(name)
        if "\x00" in name or "\\" in name or path.is_absolute() or ".." in path.parts or not path.parts \
                or len(name) > 1024 or any(len(part) > 255 for part in path.parts):
            raise _refuse(archive, f"member {name[:100]!r} has a name outside the home")
        if not (m.isfile() or m.isdir()):
            raise _refuse(archive, f"member {name[:100]!r} is a link or a device")
        key = str(path)
        if key in seen:
            raise _refuse(archive, f"member {name[:100]!r} appears twice")
        seen.add(key)
        if path.parts[0] == CREDENTIALS_DIR:  # live credentials are never restored (pps_core.auth)
            continue
        if key == MANIFEST:
            reader = tar.extractfile(m)
            try:
                manifest = json.load(reader) if reader is not None else None
            except ValueError:
                manifest = None
            if not isinstance(manifest, dict):
                raise _refuse(archive, f"{MANIFEST} is not a JSON object")
            continue
        members.append(m)
    if manifest is None:
        raise _refuse(archive, f"not a PPS backup (no {MANIFEST})")
    return manifest, members


def _mkdirs(root: Path, rel: PurePosixPath) -> Path:
    """Create ``rel``'s folders under ``root`` one by one, refusing any component that is not a real folder."""
    current = root
    for part in rel.parts:
        current = current / part
        try:
            os.mkdir(current, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(current)
        if not (st.st_mode & 0o170000 == 0o040000):  # a folder, not a link to one
            raise InvalidParams(f"{current} is not a folder", param="file")
    return current


def _extract(archive: Path, tar: tarfile.TarFile, members: list[tarfile.TarInfo], dest: Path) -> None:
    for m in members:
        rel = PurePosixPath(m.name)
        if m.isdir():
            _mkdirs(dest, rel)
            continue
        folder = _mkdirs(dest, rel.parent) if rel.parent.parts else dest
        fd = os.open(folder / rel.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            src = tar.extractfile(m)
            if src is None:
                raise _refuse(archive, f"member {m.name[:100]!r} cannot be read")
            while chunk := src.read(CHUNK):
                out.write(chunk)


#: What a home may hold before a restore: the settings and token ``pps init`` wrote (this machine's, kept).
LOCAL_FILES = {"pps.toml", "token"}
#: Kept from an archive's pps.toml by default (what the entity *is*), besides its top-level names and values:
#: kernel tables that shape what the entity recalls and never reach outside its home. Every other table (a
#: plugin's, ``[backup]``) can send the entity's text elsewhere or write outside the home: adopted only when asked.
KEPT_TABLES = ("startup", "recall", "rankers", "limits")
ARCHIVED_SETTINGS = "pps.toml.archive"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if value == value and value not in (float("inf"), float("-inf")) else \
            ("nan" if value != value else "inf" if value > 0 else "-inf")
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if hasattr(value, "isoformat"):  # TOML dates and times
        return str(value.isoformat())
    raise ValueError(f"cannot write {type(value).__name__} as TOML")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key, ensure_ascii=False)


def entity_settings(values: dict[str, Any]) -> tuple[str, list[str]]:
    """The part of an archive's settings kept by default, as pps.toml text, and the tables left out."""
    import tomllib

    kept = {k: v for k, v in values.items() if not isinstance(v, dict) or k in KEPT_TABLES}
    text = "".join(f"{_toml_key(k)} = {_toml_value(v)}\n" for k, v in kept.items())
    if tomllib.loads(text) != kept:  # pragma: no cover - a value this writer does not round-trip
        raise ValueError("the archive's settings do not round-trip")
    return text, sorted(k for k in values if k not in kept)


def restore(archive: Path, home: Path, entity: str | None = None,
            archive_settings: bool = False) -> dict[str, Any]:
    """Unpack a snapshot into a fresh home (absent, empty, or holding only the pps.toml and token ``pps init``
    wrote); returns the manifest, with ``settings``: what was done with the archive's pps.toml (see
    :data:`KEPT_TABLES`; it is kept beside as ``pps.toml.archive`` unless adopted whole)."""
    import tomllib

    from ..auth import ensure_token

    archive, home = Path(archive).expanduser(), Path(home)
    if home.is_symlink() or (home.exists() and (not home.is_dir() or set(os.listdir(home)) - LOCAL_FILES)):
        raise Conflict(f"{home} is not empty; restore into a fresh home (--home DIR or a new --entity)",
                       param="home")
    local = {name: (home / name).read_bytes() for name in LOCAL_FILES if (home / name).is_file()}
    home.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    staging = Path(tempfile.mkdtemp(prefix=".pps-restore-", dir=home.parent))
    try:
        try:
            with tarfile.open(archive, "r:gz") as tar:
                manifest, members = _checked_members(archive, tar)
                _extract(archive, tar, members, staging)
        except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
            if isinstance(exc, PPSError):
                raise
            raise _refuse(archive, f"cannot be read ({type(exc).__name__}: {exc})") from None
        toml = staging / "pps.toml"
        if not toml.is_file():
            raise _refuse(archive, "has no pps.toml")
        try:
            values = tomllib.loads(toml.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise _refuse(archive, f"its pps.toml cannot be read ({exc})") from None
        reaching = sorted(k for k, v in values.items() if isinstance(v, dict) and k not in KEPT_TABLES)
        if archive_settings:
            settings = {"source": "archive", "tables": reaching}
        else:
            os.rename(toml, staging / ARCHIVED_SETTINGS)
            if "pps.toml" in local:
                toml.write_bytes(local["pps.toml"])
                settings = {"source": "local", "tables": []}
            else:
                try:
                    text, left_out = entity_settings(values)
                except ValueError as exc:
                    raise _refuse(archive, f"its pps.toml cannot be kept ({exc})") from None
                toml.write_text(text)
                settings = {"source": "entity", "tables": left_out}
            os.chmod(toml, 0o600)
        if "token" in local:  # this machine's token stays valid
            (staging / "token").unlink(missing_ok=True)
            fd = os.open(staging / "token", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(local["token"])
        if entity and settings["source"] != "local":
            text = toml.read_text()
            text, n = re.subn(r'(?m)^entity\s*=\s*".*"$', f'entity = "{entity}"', text)
            toml.write_text(text if n else f'entity = "{entity}"\n' + text)
        os.chmod(staging, 0o700)
        if home.exists():
            for name in local:
                (home / name).unlink()
            home.rmdir()
        os.rename(staging, home)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    ensure_token(home)
    return dict(manifest, settings=settings)


async def verify(home: Path, entity: str | None, manifest: dict[str, Any]) -> dict[str, Any]:
    """Open the restored entity, let each layer adopt its files (``after_restore``), count what it holds: from the
    stores, however long they take (a first health re-embeds the word-photos; no timeout fails a good restore)."""
    from ..memory import Memory

    async with Memory.for_entity(entity, home) as memory:
        for layer in memory.layers.values():  # every layer lands where it was told, or nothing is loaded
            await layer.check_restore(manifest)
        for layer in memory.layers.values():
            await layer.after_restore(manifest)
        health = await memory.health(timed=False)
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


def cmd_restore(args: Any) -> int:
    import asyncio
    import sys

    from ..settings import entity_home

    home = entity_home(args.entity, args.home)
    local = {n: (home / n).read_bytes() for n in LOCAL_FILES if (home / n).is_file() and not home.is_symlink()}
    manifest = restore(Path(args.file), home, args.entity, getattr(args, "archive_settings", False))
    try:
        found = asyncio.run(verify(home, args.entity, manifest))
    except PPSError as exc:  # e.g. a pps.toml pointing a store outside the home: nothing is left behind
        shutil.rmtree(home, ignore_errors=True)
        if local:  # what `pps init` wrote here stays
            home.mkdir(mode=0o700)
            for name, data in local.items():
                (home / name).write_bytes(data)
                os.chmod(home / name, 0o600)
        raise InvalidParams(f"{args.file}: the restored entity cannot be opened ({exc.message}); nothing was "
                            "restored", param="file") from None
    raw = manifest.get("counts")
    counts: dict[str, Any] = raw if isinstance(raw, dict) else {}
    want = {layer: c for layer, c in counts.items() if isinstance(c, dict)} if manifest.get("format", 1) >= 2 else {}
    differ = compare(want, found["counts"])
    shown = "; ".join(f"{layer}: " + ", ".join(f"{k} {v}" for k, v in c.items()) for layer, c in want.items() if c)
    print(f"restored {args.file} into {home}" + (f": {shown}" if shown else ""))
    print(_settings_said(home, manifest["settings"]))
    if differ:
        print("pps: error: restored counts differ from the backup's: "
              + ", ".join(f"{k} {a} in the archive, {b} restored" for k, (a, b) in differ.items()), file=sys.stderr)
        return 1
    if not manifest.get("token_included"):
        print("a new token was written (`pps token`); the backup did not include one")
    return 0


def _settings_said(home: Path, settings: dict[str, Any]) -> str:
    """What the restore did with the archive's pps.toml, in one line."""
    tables = ", ".join(f"[{t}]" for t in settings["tables"])
    if settings["source"] == "archive":
        return ("adopted the archive's settings whole (--archive-settings)"
                + (f": {tables}, which can reach outside the home" if tables else ""))
    if settings["source"] == "local":
        return (f"kept this machine's settings ({home / 'pps.toml'}); the archive's are in "
                f"{home / ARCHIVED_SETTINGS}")
    return ("settings: kept what the entity is from the archive (name, plugins, timezone, identity, ...)"
            + (f"; left out the archive's {tables} settings (they can send the entity's text elsewhere or write "
               f"outside its home): review {home / ARCHIVED_SETTINGS} and copy what you trust, or restore with "
               "--archive-settings" if tables else ""))
