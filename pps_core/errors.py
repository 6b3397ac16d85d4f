"""Errors every transport knows how to present: a clear message, naming the parameter at fault."""

from __future__ import annotations

from collections.abc import Iterable


class PPSError(Exception):
    """Base of every error PPS reports to a caller."""

    status = 500
    code = "internal_error"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param

    def to_dict(self) -> dict[str, str]:
        out = {"error": self.code, "message": self.message}
        if self.param:
            out["param"] = self.param
        return out


class InvalidParams(PPSError):
    """A parameter is malformed or out of range. Nothing was written."""

    status = 422
    code = "invalid_params"


class NotFound(PPSError):
    status = 404
    code = "not_found"


class Conflict(PPSError):
    """The request contradicts the store (e.g. a range already summarized). Nothing was written."""

    status = 409
    code = "conflict"


class Unavailable(PPSError):
    """A layer or backend needed by this operation is not available (e.g. no LLM configured)."""

    status = 503
    code = "unavailable"


class UnknownOperation(PPSError):
    status = 404
    code = "unknown_operation"


class ConfigError(PPSError):
    """The entity's configuration cannot be used (unknown plugin, broken plugin, bad value)."""

    status = 500
    code = "config_error"


class Unauthorized(PPSError):
    """No bearer token was presented to a server that requires one."""

    status = 401
    code = "unauthorized"


class InvalidToken(Unauthorized):
    """A bearer token was presented but it is not this entity's (HTTP: ``error="invalid_token"`` in the challenge)."""


class Forbidden(PPSError):
    """The token presented does not belong to this entity (or the call needs one). Nothing was done."""

    status = 403
    code = "forbidden"


class TooLarge(PPSError):
    """The request body is over the entity's ``limits.max_request_bytes``."""

    status = 413
    code = "too_large"


class OwnershipError(PPSError):
    """Another process owns this entity's stores."""

    status = 409
    code = "owned_elsewhere"


class StorageError(Unavailable):
    """The entity's home cannot be written (disk full, file too large, read-only). Nothing was written."""

    code = "storage_unavailable"


_STORAGE_ERRNOS = {"ENOSPC", "EFBIG", "EROFS", "EDQUOT", "EACCES", "EPERM"}
_STORAGE_MARKERS = ("database or disk is full", "readonly database", "disk i/o error", "unable to open database",
                    "no space left", "file too large", "read-only file system", "operation not permitted")


def storage_error(exc: BaseException | None) -> StorageError | None:
    """A clear StorageError for an exception (or its cause) that says the home cannot be written; else None."""
    import errno as _errno

    seen = 0
    while exc is not None and seen < 5:
        name = _errno.errorcode.get(getattr(exc, "errno", None) or -1, "")
        text = str(exc).lower()
        if name in _STORAGE_ERRNOS or any(m in text for m in _STORAGE_MARKERS):
            why = getattr(exc, "strerror", None) or str(exc)
            return StorageError(f"the entity's home cannot be written ({why}); free space or make it writable, "
                                "then retry: nothing was stored")
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'raw_search'?)`` for a near miss among ``known``, else ''."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"


def portable_exception(exc: BaseException) -> BaseException:
    """``exc`` as another process can unpickle it, for a layer's worker process answering its server: an
    ``OSError`` keeps its errno (a full disk is still a 503 there), anything that does not survive pickling
    becomes a ``RuntimeError`` naming it."""
    import pickle

    if isinstance(exc, OSError):
        return OSError(exc.errno, exc.strerror or str(exc))
    try:
        copy: BaseException = pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return copy
