"""Entry point of the chroma plugin: the core_anchors layer (word-photos) and its operations."""

from __future__ import annotations

from pps_core import hookimpl

#: A new entity loads this plugin (pps init, a pps.toml that names no plugins); lower comes first.
PPS_DEFAULT = 30


@hookimpl
def pps_layers(memory):
    from .settings import ChromaSettings

    if memory.settings.plugin_settings(ChromaSettings, "chroma").store == "postgres":
        from .pgstore import PgAnchorLayer

        return [PgAnchorLayer(memory)]
    from .layer import AnchorLayer

    return [AnchorLayer(memory)]


@hookimpl
def pps_operations(memory):
    from .operations import operations

    return operations()


@hookimpl
def pps_register_commands(cli):
    from .sync import register

    register(cli)
