"""The turn domain's MCP resources and prompt: the newest summaries (``pps://summaries``) and summarizing the
backlog. A store plugin publishes them with two hooks::

    @hookimpl
    def pps_resources(settings):
        return pps_turns.published.resources()

    @hookimpl
    def pps_prompts(settings):
        return pps_turns.published.prompts()
"""

from __future__ import annotations

from pps_core import NotFound, Prompt, PromptArgument, PromptMessage, ResourceItem, Resources
from pps_core.errors import InvalidParams

NEWEST = 10
URI = "pps://summaries"


async def _items(call) -> list[ResourceItem]:
    return [ResourceItem(uri=URI, name="summaries", title="Newest summaries",
                         description=f"the {NEWEST} newest summaries of past turns, newest first")]


async def _read(call, uri: str) -> str:
    if uri != URI:
        raise NotFound(f"no resource {uri!r}", param="uri")
    found = (await call("get_recent_summaries", {"limit": NEWEST}))["summaries"]
    if not found:
        return "# Newest summaries\n\n(no summaries yet)\n"
    blocks = []
    for s in found:
        span = f"{s.get('time_span_start_local') or s.get('time_span_start')} to " \
               f"{s.get('time_span_end_local') or s.get('time_span_end')}"
        channels = ", ".join(s.get("channels") or [])
        blocks.append(f"## Summary {s['id']} ({span}; {s['message_count']} turns; {channels})\n\n{s['summary_text']}")
    return "# Newest summaries\n\n" + "\n\n".join(blocks) + "\n"


async def _summarize(call, arguments: dict[str, str]) -> list[PromptMessage]:
    limit = 50
    if arguments.get("limit"):
        try:
            limit = int(arguments["limit"])
        except ValueError:
            raise InvalidParams("limit: a number of turns, e.g. 50", param="limit") from None
    batch = await call("summarize_messages", {"limit": limit})
    if not batch["count"]:
        return [PromptMessage("user", "There is nothing to summarize: every turn is covered by a summary.")]
    return [PromptMessage("user", f"{batch['instructions']}\n\nmessage_ids: {batch['message_ids']}\n"
                                  f"({batch['count']} of {batch['unsummarized_count']} unsummarized turns, oldest "
                                  f"first)\n\n{batch['transcript']}")]


def resources() -> list[Resources]:
    return [Resources(family="summaries", description="the newest summaries", items=_items, read=_read,
                      changed_by=frozenset({"store_summary", "forget_turns", "forget_range", "forget_search"}))]


def prompts() -> list[Prompt]:
    return [Prompt(name="summarize_backlog", title="Summarize the backlog", render=_summarize,
                   description="The oldest unsummarized turns with their ids, to summarize and store with "
                               "store_summary.",
                   arguments=(PromptArgument("limit", "how many of the oldest unsummarized turns (default 50)"),))]
