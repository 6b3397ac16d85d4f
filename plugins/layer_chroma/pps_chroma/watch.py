"""Which word-photo files changed since the last look: inotify on Linux, so a search reads one fd, not 2,000 stats.

Where inotify is missing (not Linux, no watches left) the layer stats every file instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from pathlib import Path

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x4000, 0x8000
IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, getattr(os, "O_CLOEXEC", 0o2000000)
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
        | IN_DELETE_SELF | IN_MOVE_SELF)
_HEADER = struct.Struct("iIII")


class FolderWatch:
    """An inotify watch on one folder. ``changed()``: the names touched since the last call, or None
    when that is unknown (queue overflow, folder replaced): then everything must be checked."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        name = ctypes.util.find_library("c")
        self._libc = ctypes.CDLL(name or None, use_errno=True)
        self.fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.wd = -1
        self._add()

    def _add(self) -> None:
        self.wd = self._libc.inotify_add_watch(self.fd, os.fsencode(self.folder), MASK)
        if self.wd < 0:
            err = ctypes.get_errno()
            self.close()
            raise OSError(err, f"inotify_add_watch {self.folder} failed: {os.strerror(err)}")

    def changed(self) -> set[str] | None:
        names: set[str] = set()
        unknown = False
        while True:
            try:
                buf = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                break
            off = 0
            while off + _HEADER.size <= len(buf):
                _wd, mask, _cookie, length = _HEADER.unpack_from(buf, off)
                raw = buf[off + _HEADER.size: off + _HEADER.size + length].rstrip(b"\0")
                off += _HEADER.size + length
                if mask & (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF):
                    unknown = True
                elif raw:
                    names.add(os.fsdecode(raw))
        if unknown:
            self.rewatch()
            return None
        return names

    def rewatch(self) -> None:
        """After the folder was replaced or the queue overflowed: watch whatever folder is there now."""
        if self.wd >= 0:
            self._libc.inotify_rm_watch(self.fd, self.wd)
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._add()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def watch(folder: Path) -> FolderWatch | None:
    """A watch on ``folder``, or None where inotify is not available (the caller then stats every file)."""
    if not hasattr(os, "O_NONBLOCK"):
        return None
    try:
        return FolderWatch(folder)
    except (OSError, AttributeError):
        return None
