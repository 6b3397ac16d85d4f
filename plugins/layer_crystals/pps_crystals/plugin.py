"""Entry point of the crystals plugin: its layer and its operations."""

from __future__ import annotations

from pps_core import hookimpl

#: A new entity loads this plugin (pps init, a pps.toml that names no plugins); lower comes first.
PPS_DEFAULT = 20


@hookimpl
def pps_layers(memory):
    from .layer import CrystalLayer, CrystalSettings

    if memory.settings.plugin_settings(CrystalSettings, "crystals").store == "postgres":
        from .pgstore import PgCrystalLayer

        return [PgCrystalLayer(memory)]
    return [CrystalLayer(memory)]


@hookimpl
def pps_operations(memory):
    from .operations import operations

    return operations()


@hookimpl
def pps_register_commands(cli):
    from .sync import register

    register(cli)
