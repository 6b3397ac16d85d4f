"""The crystals as MCP resources (``pps://crystals/crystal_NNN.md``) and the prompt that crystallizes a session."""

from __future__ import annotations

from pps_core import NotFound, Prompt, PromptArgument, PromptMessage, ResourceItem, Resources
from pps_core.publish import as_list, tail

CHANGED_BY = frozenset({"crystallize", "crystal_delete", "crystal_forget"})


async def _names(call) -> tuple[list[str], list[str]]:
    listing = await call("crystal_list", {})
    return listing["current"], listing["archived"]


async def items(call) -> list[ResourceItem]:
    current, _archived = await _names(call)  # the window is short; the archive is reached by the template
    return [ResourceItem(uri=f"pps://crystals/{name}", name=name, title=f"Crystal {name[8:-3].lstrip('0') or '0'}",
                         description="a crystal in the rolling window") for name in current]


async def read(call, uri: str) -> str:
    name = tail(uri, FAMILY, "crystal")
    current, archived = await _names(call)
    if name not in current and name not in archived:
        raise NotFound(f"no crystal {name!r} (crystal_list shows them)", param="uri")
    every = await call("get_crystals", {"count": min(len(current) + len(archived), 1000)})
    for crystal in every["crystals"]:
        if crystal["name"] == name:
            return crystal["content"]
    raise NotFound(f"crystal {name!r} is older than the 1,000 newest", param="uri")


async def complete(call, argument: str, value: str) -> list[str]:
    current, archived = await _names(call)
    return as_list(sorted(current + archived, reverse=True), value) if argument == "name" else []  # newest first


FAMILY = Resources(family="crystals", description="each crystal: the window, and the archive by name", items=items,
                   read=read, template="pps://crystals/{name}", complete=complete, changed_by=CHANGED_BY)


async def crystallize_prompt(call, arguments: dict[str, str]) -> list[PromptMessage]:
    newest = (await call("get_crystals", {"count": 1}))["crystals"]
    params = {"limit": 200, "oldest_first": True}
    if arguments.get("channel"):
        params["channel"] = arguments["channel"]
    turns = await call("get_turns_since_summary", params)
    lines = [f"[{t.get('local_time', t['created_at'])}] {t['author_name']}: {t['content']}" for t in turns["turns"]]
    parts = ["Crystallize this session: write the next crystal, a short markdown note in your own voice of what "
             "changed, what you learned and what matters next (not a transcript). Then save it with the "
             "crystallize tool."]
    if newest:
        parts.append(f"Your newest crystal ({newest[-1]['name']}), for continuity:\n\n{newest[-1]['content']}")
    shown = f" (the oldest {len(lines)} of {turns['total_unsummarized']})" if turns.get("next_offset") else ""
    parts.append(f"The session so far{shown}:\n\n" + ("\n".join(lines) if lines else "(no turns since the last "
                                                                                       "summary)"))
    return [PromptMessage("user", "\n\n".join(parts))]


PROMPT = Prompt(name="crystallize_session", title="Crystallize the session", render=crystallize_prompt,
                description="Write the next crystal from the turns since the last summary (and the newest crystal).",
                arguments=(PromptArgument("channel", "only this channel's turns, e.g. terminal:<session id>"),))
