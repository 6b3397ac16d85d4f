"""Per-entity bearer tokens: generated at init, stored 0600, compared in constant time, never logged."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

TOKEN_FILE = "token"


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


def check_token(expected: str | None, presented: str | None) -> bool:
    if not expected or not presented:
        return False
    return hmac.compare_digest(expected.encode(), presented.encode())
