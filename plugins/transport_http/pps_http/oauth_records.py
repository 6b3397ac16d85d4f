"""Where an entity's OAuth state lives: its file (``<home>/credentials/oauth.json``: :class:`OAuthStore`,
:class:`FileRecords`) for a server alone, or the store a fleet shares (:class:`SharedRecords`). Secrets, codes and
tokens are kept as SHA-256 hashes only. :mod:`.oauth` is the authorization server on top."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

from pps_core.atomic import atomic_write
from pps_core.auth import CREDENTIALS_DIR

STATE_FILE = "oauth.json"
ACCESS_TTL_S = 3600  # short-lived: a client refreshes
REFRESH_TTL_S = 30 * 86400
CODE_TTL_S = 300
PENDING_TTL_S = 600  # an approval page left open this long must be asked for again
MAX_CLIENTS = 100  # dynamic registration is open to anyone: the oldest never-approved client makes room
MAX_PENDING = 200


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class OAuthStore:
    """Clients, codes and tokens of one entity, in ``<home>/credentials/oauth.json`` (secrets as hashes), re-read
    when the file changes (a second server on the same home, a restart) and rewritten atomically on every change.
    Live credentials: never in a backup (``pps_core.auth.CREDENTIALS_DIR``). A home written before keeps them at
    ``<home>/oauth.json``: moved there at first use."""

    def __init__(self, home: Path) -> None:
        import os

        self.path = Path(home) / CREDENTIALS_DIR / STATE_FILE
        older = Path(home) / STATE_FILE
        if older.is_file() and not self.path.exists():
            self.path.parent.mkdir(exist_ok=True, mode=0o700)
            os.replace(older, self.path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._data: dict[str, dict[str, Any]] = {}

    def _load(self) -> dict[str, dict[str, Any]]:
        import os

        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._stamp, self._data = None, {}
        else:
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
            if stamp != self._stamp:
                try:
                    loaded = json.loads(self.path.read_text())
                except ValueError:
                    loaded = {}
                self._data = loaded if isinstance(loaded, dict) else {}
                self._stamp = stamp
        for kind in ("clients", "codes", "access", "refresh"):
            if not isinstance(self._data.get(kind), dict):
                self._data[kind] = {}
        return self._data

    def read(self, kind: str, key: str) -> dict[str, Any] | None:
        with self._lock:
            value = self._load()[kind].get(key)
            return dict(value) if isinstance(value, dict) else None

    def change(self, edit) -> Any:
        """Apply ``edit(data)`` under the lock, drop what expired, write atomically (0600)."""
        import os

        with self._lock:
            data = self._load()
            result = edit(data)
            now = time.time()
            for kind in ("codes", "access", "refresh"):
                data[kind] = {k: v for k, v in data[kind].items()
                              if isinstance(v, dict) and (v.get("expires_at") or now + 1) > now}
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True))
            st = os.stat(self.path)
            self._stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
            return result


class FileRecords:
    """A single server's records: the clients, codes and tokens in its :class:`OAuthStore`, the approval pages
    waiting for an answer in its memory."""

    def __init__(self, store: OAuthStore) -> None:
        self.store = store
        self.pending: dict[str, dict[str, Any]] = {}  # approval pages shown, not answered yet (memory only)

    async def get(self, kind: str, key: str) -> dict[str, Any] | None:
        if kind == "pending":
            waiting = self.pending.get(key)
            return dict(waiting) if waiting and waiting["expires_at"] > time.time() else None
        return self.store.read(kind, key)

    async def put(self, kind: str, key: str, value: dict[str, Any]) -> None:
        if kind == "pending":
            now = time.time()
            self.pending = {k: v for k, v in self.pending.items() if v["expires_at"] > now}
            while len(self.pending) >= MAX_PENDING:  # anyone may start one: the oldest unanswered page expires early
                del self.pending[min(self.pending, key=lambda k: self.pending[k]["expires_at"])]
            self.pending[key] = value
            return
        self.store.change(lambda data: data[kind].__setitem__(key, value))

    async def take(self, kind: str, key: str) -> dict[str, Any] | None:
        """The record, removed: of callers taking the same one at once, exactly one gets it (single use)."""
        if kind == "pending":
            waiting = self.pending.pop(key, None)
            return waiting if waiting and waiting["expires_at"] > time.time() else None
        return self.store.change(lambda data: data[kind].pop(key, None))

    async def client(self, client_id: str) -> dict[str, Any] | None:
        return self.store.read("clients", client_id)

    async def register(self, client_id: str, info: dict[str, Any]) -> None:
        def add(data):
            clients = data["clients"]
            while len(clients) >= MAX_CLIENTS:
                idle = sorted((c.get("registered", 0), cid) for cid, c in clients.items() if not c.get("approved"))
                if not idle:
                    from mcp.server.auth.provider import RegistrationError

                    raise RegistrationError("invalid_client_metadata", "too many clients registered")
                del clients[idle[0][1]]
            clients[client_id] = {"info": info, "registered": time.time(), "approved": False}

        self.store.change(add)

    async def approved(self, client_id: str) -> None:
        """The owner approved this client (kept from then on, as long as it holds a grant)."""

        def mark(data):
            if client_id in data["clients"] and not data["clients"][client_id].get("approved"):
                data["clients"][client_id]["approved"] = True

        self.store.change(mark)

    async def grant_alive(self, grant: str | None) -> bool:
        return True  # a dropped grant's tokens are removed themselves

    async def new_grant(self, grant: str) -> None:
        pass

    async def drop_grant(self, grant: str) -> None:
        self.store.change(lambda data: _drop_grant(data, grant))


#: Shared records not put for this long go (``shared_prune``): a client registered and never approved, and one
#: approved whose last grant could not be alive any more.
CLIENT_IDLE_S = 86400
PRUNE_EVERY_S = 60.0
SHARED_PREFIX = "oauth:"
_SHARED_TTL = {"pending": PENDING_TTL_S, "codes": CODE_TTL_S, "access": ACCESS_TTL_S, "refresh": REFRESH_TTL_S,
               "grant": REFRESH_TTL_S, "client-new": CLIENT_IDLE_S, "clients": REFRESH_TTL_S + CLIENT_IDLE_S}


class SharedRecords:
    """The records of an entity several servers serve (issue 37/41): in the store they share
    (``pps_core.contracts.SharedValues``, one JSON value a record under ``oauth:<kind>:<key>``), so a client
    authorized on one server is approved, exchanges its code and calls tools on any of them. A code is taken under
    the store's job claim (``JobClaims``), so it is used once across the fleet; a grant is a value of its own (a
    revocation or a refresh empties it, which ends its tokens on every server). Expired values are pruned
    (``PrunableSharedValues``)."""

    def __init__(self, values: Any, claims: Any = None) -> None:
        self.values = values
        self.claims = claims
        self._pruned = 0.0

    @staticmethod
    def _key(kind: str, key: str) -> str:
        return f"{SHARED_PREFIX}{kind}:{key}"

    async def _read(self, kind: str, key: str) -> dict[str, Any] | None:
        raw = await self.values.shared_get(self._key(kind, key))
        try:
            value = json.loads(raw) if raw else None
        except ValueError:
            return None
        if not isinstance(value, dict) or (value.get("expires_at") or time.time() + 1) <= time.time():
            return None
        return value

    async def get(self, kind: str, key: str) -> dict[str, Any] | None:
        return await self._read(kind, key)

    async def put(self, kind: str, key: str, value: dict[str, Any]) -> None:
        await self.values.shared_put(self._key(kind, key), json.dumps(value, sort_keys=True))
        await self._prune()

    async def take(self, kind: str, key: str) -> dict[str, Any] | None:
        if self.claims is None:  # (a store without job claims: read and emptied at once)
            value = await self._read(kind, key)
            await self.values.shared_put(self._key(kind, key), "")
            return value
        async with self.claims.claim_job(f"pps-oauth-take:{self._key(kind, key)}") as mine:
            if not mine:  # another server is taking it this moment: that one has it
                return None
            value = await self._read(kind, key)
            if value is not None:
                await self.values.shared_put(self._key(kind, key), "")
            return value

    async def client(self, client_id: str) -> dict[str, Any] | None:
        return await self._read("clients", client_id) or await self._read("client-new", client_id)

    async def register(self, client_id: str, info: dict[str, Any]) -> None:
        await self.put("client-new", client_id, {"info": info, "registered": time.time(), "approved": False})

    async def approved(self, client_id: str) -> None:
        new = await self._read("client-new", client_id)
        known = new or await self._read("clients", client_id)
        if known is not None:  # put again: kept as long as it is in use
            await self.put("clients", client_id, {**known, "approved": True})
        if new is not None:
            await self.values.shared_put(self._key("client-new", client_id), "")

    async def grant_alive(self, grant: str | None) -> bool:
        return bool(grant) and bool(await self.values.shared_get(self._key("grant", str(grant))))

    async def new_grant(self, grant: str) -> None:
        await self.values.shared_put(self._key("grant", grant), "1")

    async def drop_grant(self, grant: str) -> None:
        await self.values.shared_put(self._key("grant", grant), "")

    async def _prune(self) -> None:
        from pps_core.contracts import PrunableSharedValues

        now = time.monotonic()
        if not isinstance(self.values, PrunableSharedValues) or now - self._pruned < PRUNE_EVERY_S:
            return
        self._pruned = now
        for kind, ttl in _SHARED_TTL.items():
            await self.values.shared_prune(self._key(kind, ""), ttl)


def _drop_grant(data: dict, grant: str) -> None:
    for kind in ("access", "refresh"):
        data[kind] = {k: v for k, v in data[kind].items() if v.get("grant") != grant}
