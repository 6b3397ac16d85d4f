"""Built-in plugin ``builtin:published``: the startup package as a resource, and the wake-up prompt."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..hookspecs import hookimpl
from ..publish import ANY_WRITE, Call, Prompt, PromptArgument, PromptMessage, ResourceItem, Resources

if TYPE_CHECKING:  # pragma: no cover
    from ..settings import EntitySettings

STARTUP = "pps://startup"


async def _startup_items(call: Call) -> list[ResourceItem]:
    return [ResourceItem(uri=STARTUP, name="startup", title="Startup package",
                         description="What the entity wakes up with: clock, memory health, crystals, word-photos, "
                                     "summaries and the newest unsummarized turns, within [startup] budget "
                                     "(ambient_recall 'startup'; what is left out is listed).")]


async def _startup_read(call: Call, uri: str) -> str:
    from ..errors import NotFound

    if uri != STARTUP:
        raise NotFound(f"no resource {uri!r}", param="uri")
    answer = await call("ambient_recall", {"context": "startup"})
    return str(answer["text"])


async def _wake_up(call: Call, arguments: dict[str, str]) -> list[PromptMessage]:
    from ..errors import InvalidParams

    params: dict[str, Any] = {"context": "startup"}
    if arguments.get("budget"):
        try:
            params["budget"] = int(arguments["budget"])
        except ValueError:
            raise InvalidParams("budget: a number of characters, e.g. 9000", param="budget") from None
    text = (await call("ambient_recall", params))["text"]
    return [PromptMessage("user", "You are waking up. Below is your memory's startup package: who you are, the "
                                  "time, your newest crystals and word-photos, recent summaries and what was said "
                                  "since. Read it, then tell me in a few lines where things stand and what you were "
                                  f"in the middle of.\n\n{text}")]


@hookimpl
def pps_resources(settings: EntitySettings) -> list[Resources]:
    return [Resources(family="startup", description="the startup package", items=_startup_items,
                      read=_startup_read,
                      changed_by=frozenset({ANY_WRITE}))]  # any plugin's writes may change the package


@hookimpl
def pps_prompts(settings: EntitySettings) -> list[Prompt]:
    return [Prompt(name="wake_up", title="Wake up",
                   description="Start a session with the entity's startup package and ask where things stand.",
                   render=_wake_up,
                   arguments=(PromptArgument("budget", "most characters of the package (default: [startup] budget of "
                                                         "pps.toml; 0: all of it)"),))]
