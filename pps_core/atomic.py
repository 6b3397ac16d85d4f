"""Atomic file writes: a crash mid-write leaves the old file (or no file), never half of one."""

from __future__ import annotations

import os
from pathlib import Path


def _write_tmp(path: Path, data: str) -> Path:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{id(data)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data.encode("utf-8"))
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: str) -> None:
    """Replace ``path`` with ``data`` atomically."""
    path = Path(path)
    tmp = _write_tmp(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_create(path: Path, data: str) -> bool:
    """Create ``path`` with ``data`` atomically; False (nothing written) if it already exists."""
    path = Path(path)
    tmp = _write_tmp(path, data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)
    return True


def clean_stale_tmp(folder: Path) -> int:
    """Remove temp files a crash left behind (they were never visible under a real name)."""
    n = 0
    if folder.is_dir():
        for p in folder.glob(".*.tmp"):
            p.unlink(missing_ok=True)
            n += 1
    return n
