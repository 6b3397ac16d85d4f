"""Resources and prompts the entity's plugins publish (MCP resources and prompts, or any transport's equivalent).

A plugin returns :class:`Resources` (a family of documents under one URI, pps://<family>: the startup package, the
crystals, the word-photos, ...) from ``pps_resources`` and :class:`Prompt` objects from ``pps_prompts``. Both
read the entity only through ``call`` (an async ``call(operation, params)``), so a transport serves them the
same way whether it owns the entity's stores or forwards to the server that does, with the caller's rights.
:class:`Published` gathers them for a transport: what to list, which family answers a URI, and which families
a successful operation changed (for ``resources/list_changed`` and ``resources/updated`` notifications).

URIs are ``pps://<family>`` and ``pps://<family>/<item>``, scoped to the server that lists them (one entity per MCP server).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError, InvalidParams, NotFound

#: Runs one operation of the entity for the caller, as the caller's transport would: ``await call(name, params)``.
Call = Callable[[str, dict[str, Any]], Awaitable[Any]]

#: In ``Resources.changed_by``: every successful operation that is not read-only (an aggregate such as the
#: startup package, which any plugin's writes may change, without naming their operations).
ANY_WRITE = "*"


@dataclass(frozen=True)
class ResourceItem:
    """One concrete resource, as a list shows it."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str = "text/markdown"


@dataclass(frozen=True)
class Resources:
    """A family of resources: ``pps://<family>`` itself and the URIs under ``pps://<family>/``.

    ``items(call)`` lists the concrete resources (all of them, or the newest when the whole list would be long);
    ``read(call, uri)`` returns the text of one (raise :class:`NotFound` for a URI it does not hold);
    ``template`` (RFC 6570, ``"pps://crystals/{name}"``) names every resource of the family when ``items``
    shows only some, and ``complete(call, argument, value)`` offers values for a template's variable.
    ``changed_by``: operations whose success changes the family (the list, or the text of its resources);
    :data:`ANY_WRITE` (``"*"``) stands for every operation that is not read-only.
    """

    family: str
    description: str
    items: Callable[[Call], Awaitable[list[ResourceItem]]]
    read: Callable[[Call, str], Awaitable[str]]
    template: str | None = None
    complete: Callable[[Call, str, str], Awaitable[list[str]]] | None = None
    changed_by: frozenset[str] = frozenset()
    mime_type: str = "text/markdown"

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", self.family):
            raise ConfigError(f"resource family {self.family!r}: lowercase letters, digits and '-'")

    @property
    def base(self) -> str:
        return f"pps://{self.family}"

    def holds(self, uri: str) -> bool:
        return uri == self.base or uri.startswith(self.base + "/")


@dataclass(frozen=True)
class PromptArgument:
    name: str
    description: str
    required: bool = False


@dataclass(frozen=True)
class PromptMessage:
    role: str  # "user" or "assistant"
    text: str


@dataclass(frozen=True)
class Prompt:
    """A prompt template a client offers its user (a slash command): ``render(call, arguments)`` builds its
    messages from the entity's memory at the moment it is asked for."""

    name: str
    description: str
    render: Callable[[Call, dict[str, str]], Awaitable[list[PromptMessage]]]
    arguments: tuple[PromptArgument, ...] = ()
    title: str | None = None


@dataclass
class Published:
    """Every family and prompt one entity's plugins publish, for a transport."""

    families: list[Resources] = field(default_factory=list)
    prompts: dict[str, Prompt] = field(default_factory=dict)

    @classmethod
    def collect(cls, pm: Any, settings: Any) -> Published:
        """Ask the plugins (``pps_resources``, ``pps_prompts``); a family or prompt name used twice is an error.
        Listed in the order the plugins were registered (the built-in startup package first)."""
        out = cls()
        for batch in reversed(pm.hook.pps_resources(settings=settings)):
            for family in batch or []:
                if any(f.family == family.family for f in out.families):
                    raise ConfigError(f"two plugins publish resources under {family.base}")
                out.families.append(family)
        for batch in reversed(pm.hook.pps_prompts(settings=settings)):
            for prompt in batch or []:
                if prompt.name in out.prompts:
                    raise ConfigError(f"two plugins publish a prompt named {prompt.name!r}")
                out.prompts[prompt.name] = prompt
        return out

    def family(self, uri: str) -> Resources:
        for f in self.families:
            if f.holds(uri):
                return f
        raise NotFound(f"no resource {uri!r} (resources/list and resources/templates/list show what there is)",
                       param="uri")

    async def items(self, call: Call) -> list[ResourceItem]:
        out: list[ResourceItem] = []
        for f in self.families:
            out += await f.items(call)
        return out

    async def read(self, call: Call, uri: str) -> tuple[str, str]:
        """(mime type, text) of one resource."""
        f = self.family(uri)
        return f.mime_type, await f.read(call, uri)

    def changed(self, operation: str, read_only: bool = True) -> list[Resources]:
        """The families a successful call of ``operation`` changed (``read_only``: as the operation declares)."""
        return [f for f in self.families
                if operation in f.changed_by or (not read_only and ANY_WRITE in f.changed_by)]

    async def prompt(self, call: Call, name: str, arguments: dict[str, str] | None) -> tuple[Prompt, list[PromptMessage]]:
        prompt = self.prompts.get(name)
        if prompt is None:
            raise NotFound(f"no prompt named {name!r} (prompts/list shows them)", param="name")
        given = dict(arguments or {})
        known = {a.name for a in prompt.arguments}
        unknown = sorted(set(given) - known)
        if unknown:
            raise InvalidParams(f"{unknown[0]}: prompt {name!r} takes no such argument "
                                f"(it takes: {', '.join(sorted(known)) or 'none'})", param=unknown[0])
        missing = [a.name for a in prompt.arguments if a.required and not given.get(a.name)]
        if missing:
            raise InvalidParams(f"{missing[0]}: prompt {name!r} needs it", param=missing[0])
        return prompt, await prompt.render(call, given)


def tail(uri: str, family: Resources, what: str) -> str:
    """The part of ``uri`` after ``pps://<family>/``, refused when empty or path-like (it names one item)."""
    rest = uri[len(family.base) + 1:] if uri.startswith(family.base + "/") else ""
    if not rest or "/" in rest or rest in (".", ".."):
        raise NotFound(f"no {what} at {uri!r}", param="uri")
    return rest


def as_list(values: Sequence[str], prefix: str) -> list[str]:
    """Completion: the values starting with what the user typed, at most 100 (the MCP limit)."""
    return [v for v in values if v.startswith(prefix)][:100]
