"""Entry point of the graphiti plugin: the rich_texture layer, its operations, rankers and worker."""

from __future__ import annotations

from pps_core import hookimpl

#: A new entity loads this plugin (pps init, a pps.toml that names no plugins); lower comes first.
PPS_DEFAULT = 50


@hookimpl
def pps_layers(memory):
    from .layer import GraphitiLayer

    layer = GraphitiLayer(memory)
    # A graph server keeps every byte of the layer (novelty counts included): nothing in the home to own.
    layer.exclusive = layer.settings.embedded
    return [layer]


@hookimpl
def pps_operations(memory):
    from .operations import operations

    return operations()


@hookimpl
def pps_rankers(memory):
    from .rankers import Diversity, Freshness, Novelty
    from .settings import GraphitiSettings

    s = memory.settings.plugin_settings(GraphitiSettings, "graphiti")
    if s.embedded:
        novelty = Novelty(memory.home / "graphiti" / "novelty.sqlite3", s.novelty_half_count, s.novelty_decay_days,
                          s.novelty_settle_s)
    else:  # on a graph server the counts live in the graph (pps_graphiti.novelty_graph)
        from .novelty_graph import GraphNovelty

        layer = _layer(memory)
        novelty = GraphNovelty(lambda: layer.graph if layer is not None else None,
                               s.resolved_group_id(memory.settings.entity), s.novelty_half_count,
                               s.novelty_decay_days, s.novelty_settle_s)
    return [Freshness(), Diversity(), novelty]


def _layer(memory):
    from .layer import GraphitiLayer

    layer = memory.layer("rich_texture")
    return layer if isinstance(layer, GraphitiLayer) else None


@hookimpl
def pps_memory_opened(memory):
    layer = _layer(memory)
    if layer is not None and layer.graph is not None:
        layer.ingestor.start()
    novelty = memory.rankers.get("novelty")
    if novelty is not None and hasattr(novelty, "start"):
        novelty.start()


@hookimpl
def pps_message_stored(memory, message):
    layer = _layer(memory)
    if layer is not None:
        layer.ingestor.wake()


@hookimpl
def pps_memory_closing(memory):
    layer = _layer(memory)
    if layer is not None:
        layer.ingestor.cancel()
    novelty = memory.rankers.get("novelty")
    if novelty is not None and hasattr(novelty, "flush"):
        novelty.flush()


@hookimpl
def pps_turn_copies(memory):
    """The graph keeps turns as episodes, and what was extracted from them as facts and entity summaries."""
    from pps_core.lineage import TurnCopy

    async def forget(turns):
        layer = _layer(memory)
        if layer is None:  # failed to open (or not opened here): the graph still holds them, so this copy owes it
            from pps_core.errors import Unavailable

            why = getattr(memory.layers.get("rich_texture"), "reason", None) or "not open"
            raise Unavailable(f"rich_texture: the graph is not open ({why}); the forget stays owed")
        from .writes import forget_turns

        return await forget_turns(layer, list(turns.ids))

    s = memory.settings.plugin_settings(_settings(), "graphiti")
    where = f"graph database ({s.driver})"
    return [TurnCopy("graph episodes, facts and entity summaries", where, forget=forget,
                     how="the turns' episodes are deleted, with the facts and entities only they gave the graph and the facts "
                         "whose text they wrote (a later duplicate merged into them); "
                         "the summaries of entities that stay are rebuilt from their remaining facts; the "
                         "embedded graph's file is compacted (exported and imported afresh) before forget returns")]


def _settings():
    from .settings import GraphitiSettings

    return GraphitiSettings


@hookimpl
def pps_register_commands(cli):
    from .migrate import register

    register(cli)
