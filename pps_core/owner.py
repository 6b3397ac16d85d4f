"""One owning process per entity: an advisory lock on ``<home>/owner.lock`` that names its holder, and where
that holder answers other processes (its local channel, :func:`channel_path`)."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

from .errors import ConfigError, OwnershipError

LOCK_NAME = "owner.lock"
#: The owner's local channel (:mod:`pps_core.channel`): a Unix socket in the home, 0600.
CHANNEL_NAME = "owner.sock"
#: ``sun_path`` of ``struct sockaddr_un``, its terminating NUL included: a socket path must be shorter.
SUN_PATH_MAX = 104 if sys.platform == "darwin" or "bsd" in sys.platform else 108


def channel_path(home: Path, *, create: bool = True, short: bool = False) -> Path:
    """Where the owner of the entity at ``home`` answers other processes: ``<home>/owner.sock``, or, when that
    path is too long for a Unix socket (``SUN_PATH_MAX``) or ``short`` (the home's file system takes no
    sockets), ``<runtime>/pps-<uid>/<hash of the home>.sock`` in a private folder (``$XDG_RUNTIME_DIR``, else
    the temporary folder, else ``/tmp``). The owner lock records the one in use. ``create``: make the private
    folder when missing (else only compute the path)."""
    home = Path(home).absolute()
    own = home / CHANNEL_NAME
    if not short and len(os.fsencode(own)) < SUN_PATH_MAX:
        return own
    import hashlib  # here: the hooks' fast path reads the lock through this module, and needs neither
    import tempfile

    key = hashlib.sha256(os.fsencode(home)).hexdigest()[:24] + ".sock"
    folder = f"pps-{os.getuid()}"
    bases = [b for b in (os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir(), "/tmp") if b]
    for base in bases:
        path = Path(base) / folder / key
        if Path(base).is_absolute() and len(os.fsencode(path)) < SUN_PATH_MAX:
            if create:
                _private_folder(path.parent)
            return path
    raise ConfigError(f"no folder gives a short enough path for the entity's socket (home {home})")


def _private_folder(path: Path) -> None:
    """Make ``path`` (0700), or check the one there is: a folder (not a link) of this user that nobody else can
    enter. In a shared temporary folder another user could have made it first: refused, not used."""
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise ConfigError(f"{path} (the folder of the entity's socket) is not a private folder of this user: "
                          "remove it, or set XDG_RUNTIME_DIR to a private folder")


def remove_stale_channel(home: Path) -> None:
    """Remove a socket a dead owner left at :func:`channel_path` (killed: it never removed its own). Only
    called by the process that holds the owner lock: no live owner can be listening there."""
    for short in (False, True):
        try:
            path = channel_path(home, create=False, short=short)
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                path.unlink()
        except (OSError, ConfigError):
            pass


def read_owner(home: Path) -> dict[str, Any] | None:
    """Who owns this entity's stores now (pid, channel, address, since), or None if nobody holds the lock."""
    path = home / LOCK_NAME
    if not path.exists():
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return json.loads(path.read_text() or "{}") or {"pid": None}
            except (OSError, ValueError):
                return {"pid": None}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class OwnerLock:
    """Held for as long as a process owns the entity's stores."""

    def __init__(self, home: Path) -> None:
        self.path = home / LOCK_NAME
        self._fd: int | None = None
        self.info: dict[str, Any] = {}
        #: Set by a process that takes the lock in order to serve: until it publishes its local channel (or an
        #: address) the lock says ``starting``, and a command that meets it waits for it (``pps_core.forward``)
        #: instead of failing.
        self.starting = False

    def acquire(self, address: str | None = None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            owner = read_owner(self.path.parent) or {}
            where = f" serving at {owner['address']}" if owner.get("address") else ""
            raise OwnershipError(
                f"entity at {self.path.parent} is owned by another process (pid {owner.get('pid')}{where}); "
                "talk to that server, or stop it first"
            ) from None
        self._fd = fd
        remove_stale_channel(self.path.parent)  # the lock is ours: whatever socket is there, nobody answers it
        self.info = {"pid": os.getpid(), "address": address, "since": time.time()}
        if self.starting and not address:
            self.info["starting"] = True
        self._write()

    def set_address(self, address: str | None) -> None:
        """Publish where a transport serves the entity (an HTTP URL: shown to the user, and reached when the
        owner has no local channel)."""
        self.info["address"] = address
        self.info.pop("starting", None)
        self._write()

    def set_channel(self, path: Path | None) -> None:
        """Publish the owner's local channel (:mod:`pps_core.channel`): other processes reach it there."""
        if path is None:
            self.info.pop("channel", None)
        else:
            self.info["channel"] = str(path)
            self.info.pop("starting", None)
        self._write()

    def _write(self) -> None:
        if self._fd is None:
            return
        data = json.dumps(self.info).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None
