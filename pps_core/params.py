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
