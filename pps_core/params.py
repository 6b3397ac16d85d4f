"""Parameter types shared by every plugin's operations (pydantic ``Annotated`` types)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict


def _text(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


#: Non-empty text without NUL characters: what every operation takes as content, a query or a name.
#: Bound its length with ``Field(max_length=...)`` beside it.
Text = Annotated[str, AfterValidator(_text)]


class Params(BaseModel):
    """Base of an operation's parameters: unknown keys are an error naming them."""

    model_config = ConfigDict(extra="forbid")


class NoParams(Params):
    """An operation that takes no parameters."""


def _host_path(value: str) -> str:
    import os

    if not value.strip():
        raise ValueError("must not be blank")
    if "\x00" in value:
        raise ValueError("must not contain NUL characters (no file name can)")
    try:
        os.fsencode(value)
    except UnicodeError:
        raise ValueError("must be a file name this system can encode (no lone surrogates)") from None
    return value


#: A path on the host, as a caller names it (a log to read, an archive): non-blank, no NUL, encodable as a file
#: name, so what the operation then does with it (resolve, stat, open) never fails on the bytes themselves (a
#: NUL reached ``Path.resolve`` as a ValueError, a 500). Where it may point is the operation's own check.
HostPath = Annotated[str, AfterValidator(_host_path)]


def _store_path(value: str) -> str:
    from pathlib import PurePosixPath

    path = PurePosixPath(value)
    if not value.strip() or "\x00" in value or "\\" in value or path.is_absolute() or ".." in path.parts:
        raise ValueError("must be a path inside the entity's home (relative, no '..')")
    return value


#: A store's file or folder, relative to the entity's home and confined there: a ``pps.toml`` (one restored
#: from someone else's archive, say) can never point a store at another entity's files.
StorePath = Annotated[str, AfterValidator(_store_path)]
