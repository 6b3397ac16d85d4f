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
        # Any number of PPS processes may serve these at once (unique message_id, advisory locks): when every
        # layer of an entity is non-exclusive, Memory.open takes no owner lock (``Layer.exclusive``).
        layer.exclusive = False
    return layers


@hookimpl
def pps_operations(memory):
    from pps_sqlite.operations import operations

    return operations()  # the same Operation objects: their handlers call the raw_capture layer's TurnStore
