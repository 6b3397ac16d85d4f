"""Entry point of the chroma plugin: the core_anchors layer (word-photos) and its operations."""

from __future__ import annotations

from pps_core import hookimpl


@hookimpl
def pps_layers(memory):
    from .layer import AnchorLayer

    return [AnchorLayer(memory)]


@hookimpl
def pps_operations(memory):
    from .operations import operations

    return operations()


@hookimpl
def pps_resources(settings):
    from .published import FAMILY

    return [FAMILY]
