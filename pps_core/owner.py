"""One owning process per entity: an advisory lock on ``<home>/owner.lock`` that names its holder."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from .errors import OwnershipError

LOCK_NAME = "owner.lock"


def read_owner(home: Path) -> dict[str, Any] | None:
    """Who owns this entity's stores now (pid, address, since), or None if nobody holds the lock."""
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
        #: Set by a process that takes the lock in order to serve: until it publishes its address the lock says
        #: ``starting``, and a command that meets it waits for the address (``pps_core.forward``) instead of failing.
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
        self.info = {"pid": os.getpid(), "address": address, "since": time.time()}
        if self.starting and not address:
            self.info["starting"] = True
        self._write()

    def set_address(self, address: str | None) -> None:
        self.info["address"] = address
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
