"""Entry point of the postgres plugin: the sqlite plugin's layers and operations, on a PostgreSQL store."""

from __future__ import annotations

from pps_core import hookimpl


@hookimpl
def pps_layers(memory):
    from pps_sqlite.layers import RawCaptureLayer, SummariesLayer

    from .store import PostgresStore

    raw = RawCaptureLayer(memory, PostgresStore(memory))
    layers = [raw, SummariesLayer(memory, raw)]
    for layer in layers:
        # ``Layer.exclusive`` (pps_core): Memory.open builds the layers first and
        # take the owner lock only if one of them is exclusive. These are not: any number of PPS processes
        # may serve them at once (unique message_id, advisory locks). Until then the lock is per home, so
        # servers of one entity run with a home each (as on separate machines).
        layer.exclusive = False
    return layers


@hookimpl
def pps_operations(memory):
    from pps_sqlite.operations import operations

    return operations()  # the same Operation objects: their handlers call the raw_capture layer's TurnStore
