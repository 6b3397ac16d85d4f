"""Entry point of the crystals plugin: its layer and its operations."""

from __future__ import annotations

from pps_core import hookimpl


@hookimpl
def pps_layers(memory):
    from .layer import CrystalLayer

    return [CrystalLayer(memory)]


@hookimpl
def pps_operations(memory):
    from .operations import operations

    return operations()


@hookimpl
def pps_resources(settings):
    from .published import FAMILY

    return [FAMILY]


@hookimpl
def pps_prompts(settings):
    from .published import PROMPT

    return [PROMPT]
