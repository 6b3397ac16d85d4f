"""Plugin ``upkeep``: the ``pps_upkeep`` operation, the ``pps upkeep`` command, the periodic loop."""

from __future__ import annotations

from typing import Any

from pps_core import Operation, hookimpl

#: A new entity loads this plugin (pps init, a pps.toml that names no plugins); lower comes first.
PPS_DEFAULT = 70
#: The chat model (``pps_chat_model``) comes from the ``llm`` plugin: an entity listing this one loads it too.
PPS_REQUIRES = ("llm",)



@hookimpl
def pps_operations(memory) -> list[Operation]:
    from .upkeep import UpkeepParams, run_upkeep

    return [Operation(
        name="pps_upkeep", params=UpkeepParams, handler=run_upkeep, group="summaries",
        description=("Retry the forgets a copy still owes (owed_forgets), then summarize the oldest unsummarized turns with the configured LLM, batch by batch, until at "
                     "most `target` remain (speaker names kept verbatim; each summary marks exactly its turns), "
                     "then ingest queued turns into the graph if loaded. Without an LLM it says so; an agent can "
                     "still summarize with summarize_messages + store_summary."))]


class UpkeepEntity:
    """Upkeep's object for one entity (``pps_entity_plugin``): its periodic loop, from open to close."""

    def __init__(self, memory) -> None:
        self.memory = memory
        self.loop: Any = None

    @hookimpl
    def pps_memory_opened(self) -> None:
        from .upkeep import UpkeepLoop, UpkeepSettings

        cfg = self.memory.settings.plugin_settings(UpkeepSettings, "upkeep")
        if cfg.interval_s:  # without an LLM it only retries owed forgets
            self.loop = UpkeepLoop(self.memory, cfg.interval_s)
            self.loop.start()

    @hookimpl
    def pps_memory_closing(self) -> None:
        loop, self.loop = self.loop, None
        if loop is not None:
            loop.stop_soon()


@hookimpl
def pps_entity_plugin(memory):
    return UpkeepEntity(memory)


@hookimpl
def pps_register_commands(cli) -> None:
    from .upkeep import cmd_upkeep

    p = cli.add("upkeep", cmd_upkeep, help="summarize old turns with the configured LLM until under target")
    cli.entity_args(p)
    p.add_argument("--target", type=int, help="stop at this many unsummarized turns")
    p.add_argument("--batch-size", type=int, help="turns per summary")
    p.add_argument("--local", action="store_true", help="open the stores here even if a server runs")
