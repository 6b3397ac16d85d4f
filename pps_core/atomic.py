"""Atomic file writes: a crash mid-write leaves the old file (or no file), never half of one. And the one way a
layer reads a file of its own folder that anyone could have replaced by a link (:func:`read_plain`)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class NotPlainFile(OSError):
    """A file a layer keeps was found as a link (or not a regular file): not read. The message says which."""


def link_problem(st: os.stat_result) -> str | None:
    """Why a file (its ``lstat``, or ``fstat`` of it opened) is not read as a layer's own file, or None: a link
    would make a read return a file outside the folder (``ln -s ~/.ssh/id_ed25519 notes/n.md``),
    and a hard link is another name of a file that may live elsewhere."""
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link: links are not followed (a plain file is read, a link never)"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_nlink > 1:
        return "a hard link (the file has other names, maybe outside the folder): copy it in instead"
    return None


def read_plain(path: Path | str) -> bytes:
    """The bytes of a plain file, never through a link: opened with ``O_NOFOLLOW``, then checked on the open file
    itself (so a link swapped in between is refused too). Raises :class:`NotPlainFile` for a link, a hard link or
    what is not a regular file, ``FileNotFoundError`` when there is none, any other ``OSError`` as it comes."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotPlainFile(errno.ELOOP, f"{Path(path).name}: a symbolic link: links are not followed") from None
        raise
    with os.fdopen(fd, "rb") as f:
        problem = link_problem(os.fstat(f.fileno()))
        if problem:
            raise NotPlainFile(errno.EPERM, f"{Path(path).name}: {problem}")
        return f.read()


def plain_problem(path: Path | str) -> str | None:
    """Why ``path`` would not be read by :func:`read_plain` (from its ``lstat``), or None (a plain file, or none)."""
    try:
        return link_problem(os.lstat(path))
    except FileNotFoundError:
        return None


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
