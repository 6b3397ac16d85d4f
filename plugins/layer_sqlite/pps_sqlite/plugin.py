"""Entry point of the sqlite plugin: the raw_capture and message_summaries layers and their operations."""

from __future__ import annotations

from pps_core import hookimpl


@hookimpl
def pps_layers(memory):
    from .layers import open_layers

    return open_layers(memory)


@hookimpl
def pps_operations(memory):
    from .operations import operations

    return operations()
