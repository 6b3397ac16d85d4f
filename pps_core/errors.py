"""Errors every transport knows how to present: a clear message, naming the parameter at fault."""

from __future__ import annotations


class PPSError(Exception):
    """Base of every error PPS reports to a caller."""

    status = 500
    code = "internal_error"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param

    def to_dict(self) -> dict:
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
