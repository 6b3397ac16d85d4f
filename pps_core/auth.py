"""Per-entity bearer tokens: generated at init, stored 0600, compared in constant time, never logged."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

TOKEN_FILE = "token"
#: The folder of an entity's home where plugins keep live credentials (an OAuth server's clients and grants). Like
#: the token, it is never put in a backup archive nor restored from one: restoring an older archive must not bring
#: back a grant revoked since, and an archive is not a place for credentials that work.
CREDENTIALS_DIR = "credentials"


def token_path(home: Path) -> Path:
    return Path(home) / TOKEN_FILE


def read_token(home: Path) -> str | None:
    path = token_path(home)
    try:
        value = path.read_text().strip()
    except FileNotFoundError:
        return None
    return value or None


def write_token(home: Path, token: str | None = None) -> str:
    """Write (or rotate to) a new token atomically with 0600 permissions; returns it."""
    import secrets  # here, not at the top: the hooks' fast path reads tokens and costs every import

    token = token or secrets.token_urlsafe(32)
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = home / f".{TOKEN_FILE}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, token.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, token_path(home))
    return token


def ensure_token(home: Path) -> str:
    return read_token(home) or write_token(home)


def token_digest(token: str) -> str:
    """What a store shared by several servers keeps of the token (:data:`SHARED_KEY`): never the token itself."""
    import hashlib

    return hashlib.sha256(token.encode()).hexdigest()


#: The key of the fleet's token in a store several servers share (:class:`pps_core.contracts.SharedValues`): JSON
#: ``{"current": digest, "retired": [digests rotated away, newest last]}`` (:func:`token_digest`, never a token).
SHARED_KEY = "token-sha256"
#: Retired digests kept: a server started from a home this many rotations stale still joins the fleet's token.
RETIRED_KEPT = 20


async def sync_fleet_token(store: Any, gate: TokenGate, *, rotated_from: str | None = None) -> bool:
    """Keep ``gate`` in step with the fleet's token in ``store`` (a :class:`pps_core.contracts.SharedValues`);
    True when this server's token is the fleet's.

    A server joins the fleet's token when its home holds it, or one the fleet rotated away (a stale copy: the
    fleet's current token is then the only one it takes). The first server to start puts its own there. A
    server whose home holds another token (never the fleet's) keeps to its own file. ``rotated_from``: this
    home's token before a rotation made here (``pps_regenerate_token``), which the fleet then retires."""
    import json

    mine = gate.current()
    digest = token_digest(mine) if mine else None
    raw = await store.shared_get(SHARED_KEY)
    try:
        record = json.loads(raw) if raw else None
    except ValueError:
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("current"), str):
        record = None
    if rotated_from is not None and digest is not None:
        old = token_digest(rotated_from)
        if record is None or old == record["current"] or old in record.get("retired", []):
            retired = [d for d in (record or {}).get("retired", []) if d not in (old, digest)]
            record = {"current": digest, "retired": [*retired, old][-RETIRED_KEPT:]}
            await store.shared_put(SHARED_KEY, json.dumps(record))
    elif record is None and digest is not None:
        record = {"current": digest, "retired": []}
        await store.shared_put(SHARED_KEY, json.dumps(record))
    joined = record is not None and digest is not None and (
        digest == record["current"] or digest in record.get("retired", []))
    gate.adopt(record["current"] if joined and record is not None else None)
    return joined


class TokenGate:
    """Who may call one entity: the holder of its token, or anyone a transport's own gate admitted.

    The token is re-read when its file changes, so ``pps_regenerate_token`` takes effect at once. Whether a
    token is required is decided when the gate is made: a server that started with a token never silently
    drops auth when the file disappears.
    """

    def __init__(self, entity: str, home: Path) -> None:
        self.entity = entity
        self.path = token_path(home)
        self._stamp: tuple[int, int, int] | None = None
        self._token: str | None = None
        self.required = self.current() is not None
        #: The fleet's token (its digest), when several servers serve the entity: it, not this home's file, says
        #: which token is good (a transport keeps it in step with the shared store).
        self.shared_digest: str | None = None
        self._adopted: tuple[int, int, int] | None = None

    def adopt(self, digest: str | None) -> None:
        """The fleet's token is the one of ``digest`` (None: this home's file says), until this home's file
        changes (a rotation here is in force at once, before the store is told)."""
        self.current()
        self.shared_digest, self._adopted = digest, self._stamp

    def accepts(self, token: str | None) -> bool:
        """Whether ``token`` is the entity's token now (the fleet's, or this home's file)."""
        return bool(token) and self.accepts_digest(token_digest(token or ""))

    def accepts_digest(self, digest: str | None) -> bool:
        """:meth:`accepts`, given the token's :func:`token_digest` (what a session keeps instead of the token)."""
        import hmac

        mine = self.current()
        if self.shared_digest is not None and self._stamp == self._adopted:
            expected: str | None = self.shared_digest
        else:
            expected = token_digest(mine) if mine else None
        if not expected or not digest:
            return False
        return hmac.compare_digest(expected.encode(), digest.encode())

    def current(self) -> str | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._stamp, self._token = None, None
            return None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self._token = self.path.read_text().strip() or None
            self._stamp = stamp
        return self._token

    def check(self, token: str | None, *, sensitive: bool = False) -> None:
        """Raise Unauthorized (none presented), InvalidToken (not this entity's) or Forbidden (a sensitive
        operation on an entity that has no token: nobody could be told apart)."""
        from .errors import Forbidden, InvalidToken, Unauthorized

        if not self.required:
            if sensitive:
                raise Forbidden(f"entity {self.entity!r} has no token: this operation needs one (run `pps init`)")
            return
        if not token:
            raise Unauthorized(f"entity {self.entity!r} needs 'Authorization: Bearer <token>' (see `pps token`)")
        if not self.accepts(token):
            raise InvalidToken(f"this token does not grant access to entity {self.entity!r}")
