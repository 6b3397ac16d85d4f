"""Entry point of the crystals plugin: its layer and its operations."""

from __future__ import annotations

from pps_core import hookimpl

#: A new entity loads this plugin (pps init, a pps.toml that names no plugins); lower comes first.
PPS_DEFAULT = 20


class Crystals:
    """The crystals plugin for one entity (``pps_entity_plugin``): the layer it builds at each open, and the
    operations that run on that layer."""

    def __init__(self, memory) -> None:
        self.memory = memory
        self.layer = None

    @hookimpl
    def pps_layers(self):
        from .layer import CrystalLayer, CrystalSettings

        if self.memory.settings.plugin_settings(CrystalSettings, "crystals").store == "postgres":
            from .pgstore import PgCrystalLayer

            self.layer = PgCrystalLayer(self.memory)
        else:
            self.layer = CrystalLayer(self.memory)
        return [self.layer]

    @hookimpl
    def pps_operations(self):
        from .operations import operations

        return operations(self.open_layer)

    def open_layer(self):
        """The crystal layer this object built, open; else Unavailable saying why."""
        if self.layer is None:
            from pps_core.errors import Unavailable

            raise Unavailable("crystallization is unavailable: not open")
        return self.memory.require(self.layer)


@hookimpl
def pps_entity_plugin(memory):
    return Crystals(memory)


@hookimpl
def pps_register_commands(cli):
    from .sync import register

    register(cli)


@hookimpl
def pps_resources(settings):
    from .published import FAMILY

    return [FAMILY]


@hookimpl
def pps_prompts(settings):
    from .published import PROMPT

    return [PROMPT]
