"""Entry point of the chroma plugin: the core_anchors layer (word-photos) and its operations."""

from __future__ import annotations

from pps_core import hookimpl

#: A new entity loads this plugin (pps init, a pps.toml that names no plugins); lower comes first.
PPS_DEFAULT = 30


class Anchors:
    """The chroma plugin for one entity (``pps_entity_plugin``): the word-photo layer it builds at each open, and
    the operations that run on that layer."""

    def __init__(self, memory) -> None:
        self.memory = memory
        self.layer = None

    @hookimpl
    def pps_layers(self):
        from .settings import ChromaSettings

        if self.memory.settings.plugin_settings(ChromaSettings, "chroma").store == "postgres":
            from .pgstore import PgAnchorLayer

            self.layer = PgAnchorLayer(self.memory)
        else:
            from .layer import AnchorLayer

            self.layer = AnchorLayer(self.memory)
        return [self.layer]

    @hookimpl
    def pps_operations(self):
        from .operations import operations

        return operations(self.open_layer)

    def open_layer(self):
        """The word-photo layer this object built, open; else Unavailable saying why."""
        if self.layer is None:
            from pps_core.errors import Unavailable

            raise Unavailable("core_anchors is unavailable: not open")
        return self.memory.require(self.layer)


@hookimpl
def pps_entity_plugin(memory):
    return Anchors(memory)


@hookimpl
def pps_register_commands(cli):
    from .sync import register

    register(cli)


@hookimpl
def pps_resources(settings):
    from .published import FAMILY

    return [FAMILY]
