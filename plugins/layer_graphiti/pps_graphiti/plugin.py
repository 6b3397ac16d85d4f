"""Entry point of the graphiti plugin: the rich_texture layer, its operations, rankers and worker."""

from __future__ import annotations

from pps_core import hookimpl

#: A new entity loads this plugin (pps init, a pps.toml that names no plugins); lower comes first.
PPS_DEFAULT = 50


class GraphitiEntity:
    """The graphiti plugin's object for one entity (``pps_entity_plugin``): the rich_texture layer it builds at
    each open, its operations (run on that layer), its rankers (the novelty counts among them) and its worker."""

    def __init__(self, memory) -> None:
        from .rankers import Diversity, Freshness, Novelty
        from .settings import GraphitiSettings

        self.memory = memory
        self.layer = None
        s = memory.settings.plugin_settings(GraphitiSettings, "graphiti")
        if s.embedded:
            novelty: Novelty = Novelty(memory.home / "graphiti" / "novelty.sqlite3", s.novelty_half_count,
                                       s.novelty_decay_days, s.novelty_settle_s)
        else:  # on a graph server the counts live in the graph (pps_graphiti.novelty_graph)
            from .novelty_graph import GraphNovelty

            novelty = GraphNovelty(lambda: self.layer.graph if self.layer is not None else None,
                                   s.resolved_group_id(memory.settings.entity), s.novelty_half_count,
                                   s.novelty_decay_days, s.novelty_settle_s)
        self.novelty = novelty
        #: The layer's own rankers, in the order it applies them when ``[rankers]`` names none for it.
        self.rankers = [Freshness(), Diversity(), novelty]

    @hookimpl
    def pps_layers(self):
        from .layer import GraphitiLayer

        self.layer = layer = GraphitiLayer(self.memory, self.rankers, self.novelty)
        # A graph server keeps every byte of the layer (novelty counts included): nothing in the home to own.
        layer.exclusive = layer.settings.embedded
        return [layer]

    @hookimpl
    def pps_operations(self):
        from .operations import operations

        return operations(self.open_layer)

    @hookimpl
    def pps_rankers(self):
        return list(self.rankers)

    def opened(self):
        """The layer this object built, if it is open in the memory (None: it failed to open, or is not open)."""
        return self.layer if self.layer is not None and self.memory.is_open(self.layer) else None

    def open_layer(self):
        """The open layer, or Unavailable saying why (the graph could not open)."""
        if self.layer is None:
            from pps_core.errors import Unavailable

            raise Unavailable("rich_texture is unavailable: not open")
        return self.memory.require(self.layer)

    @hookimpl
    def pps_memory_opened(self):
        layer = self.opened()
        if layer is not None and layer.graph is not None:
            layer.ingestor.start()
        self.novelty.start()

    @hookimpl
    def pps_message_stored(self):
        layer = self.opened()
        if layer is not None:
            layer.ingestor.wake()

    @hookimpl
    def pps_memory_closing(self):
        layer = self.opened()
        if layer is not None:
            layer.ingestor.cancel()
        self.novelty.flush()

    @hookimpl
    def pps_turn_copies(self):
        """The graph keeps turns as episodes, and what was extracted from them as facts and entity summaries."""
        from pps_core.lineage import TurnCopy

        async def forget(turns):
            from pps_core.errors import Unavailable

            try:
                layer = self.open_layer()
            except Unavailable as exc:  # failed to open (or not here): the graph still holds them, so this copy owes it
                raise Unavailable(f"rich_texture: the graph is not open ({exc}); the forget stays owed") from None
            from .writes import forget_turns

            return await forget_turns(layer, list(turns.ids))

        s = self.memory.settings.plugin_settings(_settings(), "graphiti")
        where = f"graph database ({s.driver})"
        return [TurnCopy("graph episodes, facts and entity summaries", where, forget=forget,
                         how="the turns' episodes are deleted, with the facts and entities only they gave the graph and "
                             "the facts whose text they wrote (a later duplicate merged into them); "
                             "the summaries of entities that stay are rebuilt from their remaining facts; the "
                             "embedded graph's file is compacted (exported and imported afresh) before forget returns")]


@hookimpl
def pps_entity_plugin(memory):
    return GraphitiEntity(memory)


def _settings():
    from .settings import GraphitiSettings

    return GraphitiSettings


@hookimpl
def pps_register_commands(cli):
    from .migrate import register

    register(cli)
